/**
 * Caches the result of `load` for `ttlMs`; `clear()` forgets it at once (after a local write).
 * Concurrent callers share one pending load. `get(arg)` hands `arg` to a load it starts: callers
 * inside a transaction pass it, because on SQLite a query outside the transaction would wait forever
 * for the connection the transaction holds.
 */
export function memo<T, A = void>(ttlMs: number, load: (arg: A) => Promise<T>): { get: (arg: A) => Promise<T>; clear: () => void } {
  let value: Promise<T> | null = null;
  let expires = 0;
  return {
    get(arg: A) {
      const now = Date.now();
      if (!value || now >= expires) {
        expires = now + ttlMs;
        value = load(arg);
        value.catch(() => {
          value = null;
        });
      }
      return value;
    },
    clear() {
      value = null;
    },
  };
}

/** The same, one cache entry per key (bounded: entries are dropped when expired or cleared). */
export function memoByKey<T>(ttlMs: number, load: (key: string) => Promise<T>, maxKeys = 10_000): { get: (key: string) => Promise<T>; clear: (key: string) => void } {
  const entries = new Map<string, { value: Promise<T>; expires: number }>();
  return {
    get(key) {
      const now = Date.now();
      const cached = entries.get(key);
      if (cached && now < cached.expires) return cached.value;
      if (entries.size >= maxKeys) for (const [stale, entry] of entries) if (entry.expires <= now || entries.size >= maxKeys) entries.delete(stale);
      const value = load(key);
      entries.set(key, { value, expires: now + ttlMs });
      value.catch(() => entries.delete(key));
      return value;
    },
    clear(key) {
      entries.delete(key);
    },
  };
}
