// Dashboards poll: identical queries within a short time share one ClickHouse query. A query in
// flight is joined (single flight); a result is kept for `ttlMs`, then asked again. Failures are
// never kept. Keys are the query's text and parameters, so two projects never share an entry.

export interface QueryCache {
  get<T>(key: string, run: () => Promise<T>): Promise<T>;
}

export function createQueryCache(opts: {
  ttlMs: number;
  maxEntries?: number;
  now?: () => number;
}): QueryCache {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 10_000;
  const done = new Map<string, { value: unknown; until: number }>();
  const pending = new Map<string, Promise<unknown>>();

  return {
    get<T>(key: string, run: () => Promise<T>): Promise<T> {
      const hit = done.get(key);
      if (hit && hit.until > now()) return Promise.resolve(hit.value as T);
      const shared = pending.get(key);
      if (shared) return shared as Promise<T>;
      const p = run()
        .then((value) => {
          if (opts.ttlMs > 0) {
            // Map keeps insertion order: the first entry is the oldest.
            if (done.size >= maxEntries) done.delete(done.keys().next().value as string);
            done.set(key, { value, until: now() + opts.ttlMs });
          }
          return value;
        })
        .finally(() => pending.delete(key));
      pending.set(key, p);
      return p;
    },
  };
}
