import { LRUCache } from 'lru-cache';

/**
 * Caches the result of `load` for `ttlMs`; `clear()` forgets it at once (after a local write).
 * `get(arg)` hands `arg` to a load it starts: callers inside a transaction pass it, because on SQLite
 * a query outside the transaction would wait forever for the connection the transaction holds. For
 * the same reason a load still pending is shared only with callers passing the same `arg`: a caller
 * inside a transaction that awaited a load started outside it would wait for itself.
 */
export function memo<T, A = void>(ttlMs: number, load: (arg: A) => Promise<T>): { get: (arg: A) => Promise<T>; clear: () => void } {
  let cached: { value: Promise<T>; arg: A; settled: boolean; expires: number } | null = null;
  return {
    get(arg: A) {
      const now = Date.now();
      if (cached && now < cached.expires && (cached.settled || cached.arg === arg)) return cached.value;
      const entry = { value: load(arg), arg, settled: false, expires: now + ttlMs };
      cached = entry;
      entry.value.then(
        () => {
          entry.settled = true;
        },
        () => {
          if (cached === entry) cached = null;
        },
      );
      return entry.value;
    },
    clear() {
      cached = null;
    },
  };
}

/**
 * The same, one entry per key, at most `maxKeys` (the least recently used goes first). A failed load
 * is forgotten, but only while it is still the entry: a newer load (after a `clear`) stays cached.
 */
export function memoByKey<T>(
  ttlMs: number,
  load: (key: string) => Promise<T>,
  maxKeys = 10_000,
): { get: (key: string) => Promise<T>; clear: (key: string) => void } {
  const entries = new LRUCache<string, Promise<T>>({ max: maxKeys, ttl: ttlMs });
  return {
    get(key) {
      const cached = entries.get(key);
      if (cached) return cached;
      const value = load(key);
      entries.set(key, value);
      value.catch(() => {
        if (entries.peek(key) === value) entries.delete(key);
      });
      return value;
    },
    clear(key) {
      entries.delete(key);
    },
  };
}
