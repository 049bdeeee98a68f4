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
