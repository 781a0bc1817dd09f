// Dashboards poll: identical queries within a short time share one ClickHouse query. A query in
// flight is joined (single flight); a result is fresh for `ttlMs`; after that, for `staleMs`
// more, it is still served at once while a refresh runs in the background, so a polled query
// costs ClickHouse about one run per TTL however many poll it, and staleness is bounded by
// ttlMs + staleMs. At most `backgroundRefreshes` refreshes run at a time: polling dashboards
// never take more of ClickHouse than that from ingest's inserts; the other stale answers are
// served a little longer. Failures are never kept (a failed refresh leaves the old answer until
// it is too stale). At most `maxEntries` answers are kept, the least recently used dropped
// first, so random query strings cannot grow memory. Keys are the query's text and parameters,
// so two projects never share an entry. A refresh is given the answer it replaces, fresh, stale
// or expired (usage-rolling.ts refreshes only what changed), or undefined when there is none.
// A caller that can tell a held answer is out of date (`current`, e.g. by a version of what it
// was made from) gets a new one at once, TTL or not.

export interface QueryCache {
  get<T>(
    key: string,
    run: (previous: T | undefined) => Promise<T>,
    current?: (held: T) => boolean,
  ): Promise<T>;
  /**
   * The answer `get` could give for `key` now, before its `current` check; no refresh. It counts
   * as a use (the least recently used are dropped first).
   */
  peek<T>(key: string): T | undefined;
}

export function createQueryCache(opts: {
  ttlMs: number;
  staleMs?: number;
  maxEntries?: number;
  backgroundRefreshes?: number;
  now?: () => number;
}): QueryCache {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 10_000;
  const staleMs = opts.staleMs ?? 0;
  const maxBackground = opts.backgroundRefreshes ?? 1;
  let background = 0;
  // Map keeps insertion order: re-inserting on use makes the first entry the least recent.
  const done = new Map<string, { value: unknown; fresh: number; usable: number }>();
  const pending = new Map<string, Promise<unknown>>();

  function refresh<T>(
    key: string,
    run: (previous: T | undefined) => Promise<T>,
    previous: T | undefined,
  ): Promise<T> {
    const shared = pending.get(key);
    if (shared) return shared as Promise<T>;
    const p = run(previous)
      .then((value) => {
        if (opts.ttlMs > 0) {
          const t = now();
          done.delete(key);
          if (done.size >= maxEntries) done.delete(done.keys().next().value as string);
          done.set(key, { value, fresh: t + opts.ttlMs, usable: t + opts.ttlMs + staleMs });
        }
        return value;
      })
      .finally(() => pending.delete(key));
    pending.set(key, p);
    return p;
  }

  return {
    get<T>(
      key: string,
      run: (previous: T | undefined) => Promise<T>,
      current?: (held: T) => boolean,
    ): Promise<T> {
      const hit = done.get(key);
      const t = now();
      if (hit && hit.usable > t && (current === undefined || current(hit.value as T))) {
        done.delete(key);
        done.set(key, hit);
        // Stale: answer now, refresh once behind it (a failure leaves the old answer).
        if (hit.fresh <= t && !pending.has(key) && background < maxBackground) {
          background += 1;
          refresh(key, run, hit.value as T)
            .catch(() => {})
            .finally(() => {
              background -= 1;
            });
        }
        return Promise.resolve(hit.value as T);
      }
      if (hit) done.delete(key);
      return refresh(key, run, hit?.value as T | undefined);
    },
    peek<T>(key: string): T | undefined {
      const hit = done.get(key);
      if (!hit || hit.usable <= now()) return undefined;
      done.delete(key);
      done.set(key, hit);
      return hit.value as T;
    },
  };
}
