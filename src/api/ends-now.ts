import type { QueryCache } from "./query-cache.js";

// A range that ends now (no `from`/`to`: `last`, or the default 24 h) moves with the clock. Keyed
// by the range it resolves to, every dashboard's query would change at each minute's turn, all
// would miss the cache together and start their ClickHouse queries at once (issue 48). Its
// answers are shared by what was asked instead, and refreshed behind a held answer like any
// cached query (query-cache.ts); each answer says the range it was made for.

/** Whether `q` asks for a range ending now. */
export const endsNow = (q: { from?: number; to?: number }) =>
  q.from === undefined && q.to === undefined;

/**
 * `run`'s answer, shared through `cache` by `what` and the query when the range ends now; `run`
 * resolves the range itself, at the time it runs, and is told whether its answer is shared (its
 * rows then go past the rows' cache). Otherwise (or without a cache) `run` at once.
 */
export function sharedIfEndsNow<T>(
  cache: QueryCache | undefined,
  project: string,
  what: string,
  q: { from?: number; to?: number },
  run: (shared: boolean) => Promise<T>,
): Promise<T> {
  if (cache === undefined || !endsNow(q)) return run(false);
  return cache.get<T>(project, JSON.stringify([what, q]), () => run(true));
}
