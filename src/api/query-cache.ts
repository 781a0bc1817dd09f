// Dashboards poll: identical queries within a short time share one ClickHouse query. A query in
// flight is joined (single flight); a result is fresh for `ttlMs`; after that, for `staleMs`
// more, it is still served at once while a refresh runs in the background, so a polled query
// costs ClickHouse about one run per TTL however many poll it, and staleness is bounded by
// ttlMs + staleMs. At most `backgroundRefreshes` refreshes run at a time: polling dashboards
// never take more of ClickHouse than that from ingest's inserts; the other stale answers are
// served a little longer and wait their turn, the one that stops being usable first going first
// when a refresh ends (taken by whichever poll came next, an answer refreshed a moment ago went
// again while another ran out of time, and its next poll waited for ClickHouse: issue 48); a
// waiting refresh holds its query until then, one per held answer at most. Failures are never
// kept (a failed refresh leaves the old answer until it is too stale). A refresh is given the
// answer it replaces, fresh, stale or expired (usage-rolling.ts refreshes only what changed), or
// undefined when there is none. A caller that
// can tell a held answer is out of date (`current`, e.g. by a version of what it was made from)
// gets a new one at once, TTL or not.
//
// Every project may be hostile, and each distinct query string is an entry: the cache is bounded
// by entries and by bytes (`sizeOf`, what an answer really holds), in total and per project. A
// project over its share drops its own least recently used answers; the total over its bound
// drops the least recently used of all. So one project's random queries cannot grow memory or
// push out more than its share of everyone else's answers. An answer bigger than a project's
// share is served, never kept. Expired answers are freed, not merely not served.

export interface QueryCache {
  /** `project` owns the answer: keys of two projects never meet, and its share is charged. */
  get<T>(
    project: string,
    key: string,
    run: (previous: T | undefined) => Promise<T>,
    current?: (held: T) => boolean,
  ): Promise<T>;
  /**
   * The answer `get` could give for `key` now, before its `current` check; no refresh. It counts
   * as a use (the least recently used are dropped first).
   */
  peek<T>(project: string, key: string): T | undefined;
  /**
   * The answer held for `key`, fresh or expired (until freed), for what it was made from: not
   * to be served as it is. Not a use.
   */
  last<T>(project: string, key: string): T | undefined;
  /** What is held: in all and for one project (bytes as `sizeOf` counts them). */
  usage(project?: string): { entries: number; bytes: number };
}

export interface QueryCacheOptions {
  ttlMs: number;
  staleMs?: number;
  maxEntries?: number;
  /** Bytes the cache holds at most, by `sizeOf`. */
  maxBytes?: number;
  /** The part (0–1] of `maxEntries` and `maxBytes` that one project may hold. */
  projectShare?: number;
  /** The bytes an answer keeps alive while held (with what it drags along). */
  sizeOf?: (value: unknown) => number;
  backgroundRefreshes?: number;
  now?: () => number;
}

/** A stale answer's refresh, waiting for a slot. */
interface Waiting {
  project: string;
  run: (previous: unknown) => Promise<unknown>;
}

interface Held {
  project: string;
  value: unknown;
  bytes: number;
  fresh: number;
  usable: number;
}

/** A held entry's own cost beside its answer: its key, records and map slots. */
const ENTRY_OVERHEAD = 512;

export function createQueryCache(opts: QueryCacheOptions): QueryCache {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 10_000;
  const maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
  const share = opts.projectShare ?? 1;
  const projectEntries = Math.max(1, Math.floor(maxEntries * share));
  const projectBytes = maxBytes * share;
  const sizeOf = opts.sizeOf ?? (() => 0);
  const staleMs = opts.staleMs ?? 0;
  const maxBackground = opts.backgroundRefreshes ?? 1;
  let background = 0;
  /** Stale answers asked for while every refresh slot was busy: a subset of `done`'s. */
  const waiting = new Map<string, Waiting>();
  // Maps keep insertion order: re-inserting on use makes the first entry the least recent, in
  // all (`done`) and within each project (`owned`).
  const done = new Map<string, Held>();
  const owned = new Map<string, { keys: Set<string>; bytes: number }>();
  const pending = new Map<string, Promise<unknown>>();
  let bytes = 0;
  let nextSweep = 0;

  const slot = (project: string, key: string) => JSON.stringify([project, key]);

  function drop(id: string) {
    const held = done.get(id);
    waiting.delete(id);
    if (held === undefined) return;
    done.delete(id);
    bytes -= held.bytes;
    const mine = owned.get(held.project);
    if (mine === undefined) return;
    mine.keys.delete(id);
    mine.bytes -= held.bytes;
    if (mine.keys.size === 0) owned.delete(held.project);
  }

  function touch(id: string, held: Held) {
    done.delete(id);
    done.set(id, held);
    const mine = owned.get(held.project);
    mine?.keys.delete(id);
    mine?.keys.add(id);
  }

  /** Frees every expired answer, at most once per TTL + staleness (each sweep is O(entries)). */
  function sweep(t: number) {
    if (t < nextSweep) return;
    nextSweep = t + Math.max(opts.ttlMs + staleMs, 1_000);
    for (const [id, held] of done) if (held.usable <= t) drop(id);
  }

  function keep(project: string, id: string, value: unknown) {
    const t = now();
    drop(id);
    sweep(t);
    const size = sizeOf(value) + ENTRY_OVERHEAD;
    if (size > projectBytes) return;
    let mine = owned.get(project);
    while (mine && (mine.keys.size >= projectEntries || mine.bytes + size > projectBytes)) {
      drop(mine.keys.values().next().value as string);
      mine = owned.get(project);
    }
    while (done.size >= maxEntries || bytes + size > maxBytes) {
      drop(done.keys().next().value as string);
    }
    mine = owned.get(project) ?? { keys: new Set(), bytes: 0 };
    owned.set(project, mine);
    done.set(id, {
      project,
      value,
      bytes: size,
      fresh: t + opts.ttlMs,
      usable: t + opts.ttlMs + staleMs,
    });
    mine.keys.add(id);
    mine.bytes += size;
    bytes += size;
  }

  function refresh<T>(
    project: string,
    id: string,
    run: (previous: T | undefined) => Promise<T>,
    previous: T | undefined,
  ): Promise<T> {
    const shared = pending.get(id);
    if (shared) return shared as Promise<T>;
    // A run that throws at once fails like one that rejects (a background refresh has no caller).
    let ran: Promise<T>;
    try {
      ran = run(previous);
    } catch (err) {
      ran = Promise.reject(err);
    }
    const p = ran
      .then((value) => {
        if (opts.ttlMs > 0) keep(project, id, value);
        return value;
      })
      .finally(() => pending.delete(id));
    pending.set(id, p);
    return p;
  }

  function refreshBehind(project: string, id: string, run: Waiting["run"]) {
    background += 1;
    refresh(project, id, run, done.get(id)?.value)
      .catch(() => {})
      .finally(() => {
        background -= 1;
        next();
      });
  }

  /** Starts the waiting refreshes that fit, the answer that stops being usable first first. */
  function next() {
    while (background < maxBackground && waiting.size > 0) {
      const t = now();
      let first: (Waiting & { id: string; usable: number }) | undefined;
      for (const [id, w] of waiting) {
        const held = done.get(id);
        if (held === undefined || held.usable <= t || held.fresh > t || pending.has(id)) {
          waiting.delete(id);
        } else if (held.usable < (first?.usable ?? Number.POSITIVE_INFINITY)) {
          first = { id, usable: held.usable, ...w };
        }
      }
      if (first === undefined) return;
      waiting.delete(first.id);
      refreshBehind(first.project, first.id, first.run);
    }
  }

  return {
    get<T>(
      project: string,
      key: string,
      run: (previous: T | undefined) => Promise<T>,
      current?: (held: T) => boolean,
    ): Promise<T> {
      const id = slot(project, key);
      const hit = done.get(id);
      const t = now();
      if (hit && hit.usable > t && (current === undefined || current(hit.value as T))) {
        touch(id, hit);
        // Stale: answer now, refresh once behind it (a failure leaves the old answer), or as
        // soon as its turn comes.
        if (hit.fresh <= t && !pending.has(id)) {
          const behind = run as Waiting["run"];
          if (background < maxBackground) refreshBehind(project, id, behind);
          else waiting.set(id, { project, run: behind });
        }
        return Promise.resolve(hit.value as T);
      }
      if (hit) drop(id);
      sweep(t);
      return refresh(project, id, run, hit?.value as T | undefined);
    },
    peek<T>(project: string, key: string): T | undefined {
      const id = slot(project, key);
      const hit = done.get(id);
      if (!hit || hit.usable <= now()) return undefined;
      touch(id, hit);
      return hit.value as T;
    },
    last<T>(project: string, key: string): T | undefined {
      return done.get(slot(project, key))?.value as T | undefined;
    },
    usage(project?: string) {
      if (project === undefined) return { entries: done.size, bytes };
      const mine = owned.get(project);
      return { entries: mine?.keys.size ?? 0, bytes: mine?.bytes ?? 0 };
    },
  };
}
