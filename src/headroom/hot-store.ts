import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Result } from "ioredis";
import type { RedisClient } from "../redis/connections.js";
import { mergeHotSeries } from "./hot-merge.js";
import { entry, type HotSeries } from "./hot-series.js";

// The hot headroom in Redis: per project a hash of series → HotSeries JSON, written by the ingest
// workers after ClickHouse took a batch, read by /api/v1/headroom in one round trip. Figures
// merge commutatively (hot-merge.ts), so a worker's write and a reader's refill from ClickHouse
// may interleave in any order, and a redelivered batch changes none. A write reads the copies it
// merges into (one script call), merges them in the worker, and commits each series (another)
// only if its copy did not change in between; the others it reads and merges again, a few times
// before it gives the project up to a refill. Redis only moves text: the merge in its Lua held
// every other command ~190 µs a series, 200–400 ms for a batch over 100 projects.
//
// Bounded like the alerts' series state: a sorted set per project of series by last write admits
// a new series only under the cap, and series not written for the TTL are dropped (a bounded
// number per call). A `ready` key says the project's copy is whole (refilled from ClickHouse
// since Redis last lost it); without it the reader refills first.
//
// Keys live under the queue prefix and share its hash tag: one Cluster slot, as a script that
// touches several projects needs.

/** Expired series dropped per project per call: bounded work; the rest go at later calls. */
const PRUNE_PER_CALL = 100;
/**
 * How long a batch's counted token is kept: past any redelivery of it (a batch is delivered again
 * within its manifest's life, minutes), and past the Pacific day the longest fixed count spans.
 */
export const COUNTED_TOKEN_MS = 48 * 3_600_000;
/** The longest the merge runs before it lets the worker's other work in. */
const MERGE_SLICE_MS = 5;
/** Reads and merges of one write before it gives up (each lost to another write of its series). */
const MERGE_ATTEMPTS = 8;

/**
 * Series that other writes changed under each of MERGE_ATTEMPTS merges: the write gives up for
 * now, and its caller tries again later (the ingest hook's retry; a batch's token adds only the
 * counts it still owes) rather than merging again without a pause.
 */
export class HotCopyContendedError extends Error {
  override name = "HotCopyContendedError";
  constructor(readonly projects: string[]) {
    super(
      `hot headroom: ${projects.length} projects' copies changed under ${MERGE_ATTEMPTS} merges`,
    );
  }
}

type Updates = Map<string, Map<string, HotSeries>>;

/** A write read and merged, to be committed (HotStore.prepare). */
export interface HotWritePlan {
  /** When it was read: the `now` of its merge and commit. */
  readonly at: number;
  readonly updates: Updates;
  readonly refill: boolean;
  readonly token: string | undefined;
  readonly keys: string[];
  readonly args: (string | number)[];
}

/**
 * The oldest plan a write commits: its time is the series' last write (their TTL runs from it)
 * and its counts' cut, and an insert that kept retrying can come long after its read ahead.
 */
export const PLAN_MAX_AGE_MS = 10_000;

/**
 * `prepared` when it is a plan of this write whose read succeeded, made at most PLAN_MAX_AGE_MS
 * before `now()` once it is in hand (a read ahead may still be under way as the write starts);
 * else null (read again).
 */
async function planOf(
  prepared: Promise<HotWritePlan> | undefined,
  updates: Updates,
  refill: boolean,
  token: string | undefined,
  now: () => number,
): Promise<HotWritePlan | null> {
  if (!prepared) return null;
  const plan = await prepared.catch(() => null);
  return plan &&
    plan.updates === updates &&
    plan.refill === refill &&
    plan.token === token &&
    now() - plan.at <= PLAN_MAX_AGE_MS
    ? plan
    : null;
}
const EMPTY = Buffer.alloc(0);

export function hotKeys(prefix: string) {
  return {
    /** Channel of the versions each write makes (hot-versions.ts): {project: version | null}. */
    versions: `${prefix}:hot-headroom-versions`,
    /** Hash per project: series field → HotSeries JSON. */
    series: (project: string) => `${prefix}:hot-headroom:${project}`,
    /** Sorted set per project: series field → when it was last written (ms). */
    seen: (project: string) => `${prefix}:hot-headroom-seen:${project}`,
    /**
     * Set once the project's copy was refilled from ClickHouse; its value is the copy's version,
     * a number each write moves on (readers keep an answer until it does).
     */
    ready: (project: string) => `${prefix}:hot-headroom-ready:${project}`,
    /** Set once a batch's counts were added (the token of its manifest): a repeat adds none. */
    counted: (token: string) => `${prefix}:hot-headroom-counted:${token}`,
  };
}

// The stored copy a write merges into, per project and series: what COMMIT will take as the
// series' previous copy at the same `now` ('' for none: absent, or expired and dropped by it).
// KEYS: the batch's counted-token key, then per project its series hash and seen set. ARGV: now,
// TTL, prune limit, then per project a count n and n fields. Returns the token's value ('' when
// unclaimed), then the copies in order.
const READ = `
local now, ttl, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {redis.call('GET', KEYS[1]) or ''}
local a = 4
for k = 2, #KEYS, 2 do
  local gone = {}
  for _, f in ipairs(redis.call('ZRANGEBYSCORE', KEYS[k + 1], '-inf', '(' .. (now - ttl), 'LIMIT', 0, limit)) do
    gone[f] = true
  end
  local n = tonumber(ARGV[a])
  a = a + 1
  for i = 1, n do
    local field = ARGV[a]
    a = a + 1
    out[#out + 1] = (not gone[field] and redis.call('HGET', KEYS[k], field)) or ''
  end
end
return out
`;

// The merged copies written where nothing changed since READ: a series whose previous copy is no
// longer the one merged into (its SHA-1, '' for none) is not written but returned, to be read and
// merged again. A batch's counts are added once: its token is '1' once every series it counts is
// written, 'p:' and the JSON list of "project NUL field" still owed while some are not, and a
// commit that counts checks the token is still what its merge read (else -1, nothing written).
// KEYS: the batch's counted-token key, then per project its series hash, seen set, ready key.
// ARGV: now, TTL (ms), cap, prune limit, refill ('1': also set ready, once no series conflicts),
// the versions channel, how long a batch's token is kept ('' for a write that counts nothing),
// the token as read, then per project its id, a count n and n × (field, merged JSON, score,
// SHA-1 of the copy merged into, '1' if merged with its counts). Returns the number of series
// refused by the cap, then (project, field) of each series not written. Publishes
// {project: version} on the channel (hot-versions.ts); null for a project whose copy is not whole.
const COMMIT = `
local now, ttl, cap, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local refill, channel, versions = ARGV[5] == '1', ARGV[6], {}
local token_ms, expected = ARGV[7], ARGV[8]
local counts = token_ms ~= ''
if counts and (redis.call('GET', KEYS[1]) or '') ~= expected then return {-1} end
local owing = {}
if counts and expected ~= '' then
  for _, id in ipairs(cjson.decode(string.sub(expected, 3))) do owing[id] = true end
end
local refused, out = 0, {0}
local a = 9
-- First every check, with no write: the series each project drops (expired) and keeps.
local plans = {}
for k = 2, #KEYS, 3 do
  local hkey, zkey = KEYS[k], KEYS[k + 1]
  local plan = {project = ARGV[a], writes = {}}
  a = a + 1
  plan.old = redis.call('ZRANGEBYSCORE', zkey, '-inf', '(' .. (now - ttl), 'LIMIT', 0, limit)
  local gone = {}
  for _, f in ipairs(plan.old) do gone[f] = true end
  local card = redis.call('ZCARD', zkey) - #plan.old
  local n = tonumber(ARGV[a])
  a = a + 1
  for i = 1, n do
    local field, json, score, was = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3]
    local id = plan.project .. '\\0' .. field
    if counts and expected == '' and ARGV[a + 4] == '1' then owing[id] = true end
    a = a + 5
    local prev = (not gone[field] and redis.call('HGET', hkey, field)) or ''
    if (prev == '' and was ~= '') or (prev ~= '' and redis.sha1hex(prev) ~= was) then
      out[#out + 1] = plan.project
      out[#out + 1] = field
    else
      owing[id] = nil
      local seen = nil
      if not gone[field] then seen = redis.call('ZSCORE', zkey, field) end
      if score < now - ttl then
      elseif seen or card < cap then
        table.insert(plan.writes, {field, json, score, seen})
        if not seen then card = card + 1 end
      else
        refused = refused + 1
      end
    end
  end
  plans[#plans + 1] = plan
end
out[1] = refused
if counts then
  local left = {}
  for id, _ in pairs(owing) do left[#left + 1] = id end
  table.sort(left)
  redis.call('SET', KEYS[1], #left == 0 and '1' or ('p:' .. cjson.encode(left)), 'PX', tonumber(token_ms))
end
for j, plan in ipairs(plans) do
  local k = 2 + (j - 1) * 3
  local hkey, zkey, rkey = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  for _, f in ipairs(plan.old) do
    redis.call('HDEL', hkey, f)
    redis.call('ZREM', zkey, f)
  end
  for _, w in ipairs(plan.writes) do
    redis.call('HSET', hkey, w[1], w[2])
    if not w[4] or tonumber(w[4]) < w[3] then redis.call('ZADD', zkey, w[3], w[1]) end
  end
  redis.call('PEXPIRE', hkey, ttl)
  redis.call('PEXPIRE', zkey, ttl)
  -- The version: a refill starts it at its time (a copy lost and refilled does not come back
  -- to an old number) once it is whole, a write moves it on, and only a whole copy has one.
  if refill then
    if #out == 1 then redis.call('SET', rkey, ARGV[1], 'PX', ttl) end
  elseif redis.call('EXISTS', rkey) == 1 then
    redis.call('INCR', rkey)
    redis.call('PEXPIRE', rkey, ttl)
  end
  versions[plan.project] = redis.call('GET', rkey) or cjson.null
end
redis.call('PUBLISH', channel, cjson.encode(versions))
return out
`;

// KEYS: a project's ready key, series hash. ARGV: the version of the answer the reader holds
// ('' for none). Returns {} when the copy is not whole, {version} when the reader's answer is
// current, else {version, the hash's fields and values}: one round trip either way.
const SNAPSHOT = `
local v = redis.call('GET', KEYS[1])
if not v then return {} end
if v == ARGV[1] then return {v} end
return {v, redis.call('HGETALL', KEYS[2])}
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomHotReadBuffer(...args: (string | number)[]): Result<Buffer[], Context>;
    headroomHotCommit(...args: (string | number)[]): Result<[number, ...string[]], Context>;
    headroomHotSnapshot(
      ready: string,
      series: string,
      held: string,
    ): Result<[] | [string] | [string, string[]], Context>;
  }
}

/** What a reader holding an answer made from version `held` needs (HotStore.snapshot). */
export interface HotSnapshot {
  /** Null when the copy is not whole (never refilled since Redis lost it). */
  version: string | null;
  /** The copy, unless the copy is not whole or its version is the one held. */
  series?: Map<string, HotSeries>;
  /** With the copy: the length of its text as Redis holds it. */
  bytes?: number;
}

function parseSeries(entries: Iterable<[string, string]>): Map<string, HotSeries> {
  const out = new Map<string, HotSeries>();
  for (const [field, json] of entries) out.set(field, JSON.parse(json) as HotSeries);
  return out;
}

function* pairs(flat: string[]): Generator<[string, string]> {
  for (let i = 0; i + 1 < flat.length; i += 2) yield [flat[i] as string, flat[i + 1] as string];
}

export interface HotStoreOptions {
  maxSeriesPerProject: number;
  ttlMs: number;
  now?: () => number;
}

/** The hot headroom in Redis (createHotStore): the workers write it, the read API reads it. */
export interface HotStore {
  /**
   * Rows ClickHouse acknowledged, per project and series. Returns the series refused. With the
   * batch's `token` (its manifest's), its counts are added once however often it is written;
   * without one, none are.
   */
  write(
    updates: Map<string, Map<string, HotSeries>>,
    token?: string,
    prepared?: Promise<HotWritePlan>,
  ): Promise<number>;
  /**
   * The read and merge of a write of `updates` with `token`, ahead of it (while ClickHouse takes
   * the rows): writes nothing. Given to that write, it leaves it only the commit to do; a copy
   * another write changed in between is merged again then.
   */
  prepare(updates: Map<string, Map<string, HotSeries>>, token?: string): Promise<HotWritePlan>;
  /** A project's whole copy, from ClickHouse; marks it ready. Over the cap, the newest stay. */
  refill(project: string, series: Map<string, HotSeries>): Promise<number>;
  /** The projects' copies are not whole any more: their next read refills them. */
  invalidate(projects: Iterable<string>): Promise<void>;
  /**
   * The version of a project's copy (moved on by every write), and the copy itself unless it
   * is the version `held` (an answer the reader has): one round trip.
   */
  snapshot(project: string, held: string | null): Promise<HotSnapshot>;
  /** A project's series, or null when its copy is not whole (never refilled since lost). */
  read(project: string): Promise<Map<string, HotSeries> | null>;
}

export function createHotStore(
  redis: RedisClient,
  prefix: string,
  opts: HotStoreOptions,
): HotStore {
  if (!redis.headroomHotReadBuffer) redis.defineCommand("headroomHotRead", { lua: READ });
  if (!redis.headroomHotCommit) redis.defineCommand("headroomHotCommit", { lua: COMMIT });
  if (!redis.headroomHotSnapshot) {
    redis.defineCommand("headroomHotSnapshot", { numberOfKeys: 2, lua: SNAPSHOT });
  }
  const k = hotKeys(prefix);
  const now = opts.now ?? Date.now;

  /** One read and merge of `updates` (nothing written): what `commit` sends. */
  async function readAndMerge(
    updates: Updates,
    refill: boolean,
    token: string | undefined,
  ): Promise<HotWritePlan> {
    const t = now();
    const readKeys = [k.counted(token ?? "")];
    const readArgs: (string | number)[] = [t, opts.ttlMs, PRUNE_PER_CALL];
    for (const [project, series] of updates) {
      readKeys.push(k.series(project), k.seen(project));
      readArgs.push(series.size, ...series.keys());
    }
    // As bytes: the SHA-1 compared in COMMIT is of what Redis holds, whatever its encoding.
    const [tokenRead, ...copies] = await redis.headroomHotReadBuffer(
      readKeys.length,
      ...readKeys,
      ...readArgs,
    );
    const claimed = String(tokenRead ?? "");
    // A batch's counts: while its token is unclaimed, or for the series it still owes; never
    // without a token, nor on a refill.
    const counts = !refill && token !== undefined && claimed !== "1";
    const owed = claimed.startsWith("p:")
      ? new Set(JSON.parse(claimed.slice(2)) as string[])
      : null;
    const keys = [k.counted(token ?? "")];
    const args: (string | number)[] = [
      t,
      opts.ttlMs,
      opts.maxSeriesPerProject,
      PRUNE_PER_CALL,
      refill ? "1" : "0",
      k.versions,
      counts ? COUNTED_TOKEN_MS : "",
      claimed,
    ];
    let i = 0;
    let slice = performance.now();
    for (const [project, series] of updates) {
      keys.push(k.series(project), k.seen(project), k.ready(project));
      args.push(project, series.size);
      for (const [field, s] of series) {
        // A batch's merge is ~100–200 µs a series, 100+ ms in all: in slices, so that the
        // worker's other work (an insert's answer, its jobs' locks) is not held behind it.
        if (performance.now() - slice > MERGE_SLICE_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
          slice = performance.now();
        }
        const prev = copies[i++] ?? EMPTY;
        const count = counts && (owed === null || owed.has(`${project}\0${field}`));
        // A stored copy that does not decode as a series (written by no worker) is replaced.
        let merged: HotSeries;
        try {
          merged = mergeHotSeries(
            prev.length === 0 ? null : JSON.parse(prev.toString()),
            s,
            t,
            count,
          );
        } catch {
          merged = mergeHotSeries(null, s, t, count);
        }
        const was = prev.length === 0 ? "" : createHash("sha1").update(prev).digest("hex");
        // A worker's write is a use of the series now; a refill keeps its last report's time, so
        // a series idle past the TTL is not brought back.
        const score = refill ? Math.min(s.ls, t) : t;
        args.push(field, JSON.stringify(merged), score, was, count ? "1" : "0");
      }
    }
    return { at: t, updates, refill, token, keys, args };
  }

  /**
   * Writes a plan's series whose copies did not change since its read: the series refused by
   * the cap and those that changed (to merge again), or null when another delivery of the batch
   * counted meanwhile.
   */
  async function commit(plan: HotWritePlan): Promise<{ refused: number; changed: Updates } | null> {
    const [refused, ...conflicts] = await redis.headroomHotCommit(
      plan.keys.length,
      ...plan.keys,
      ...plan.args,
    );
    if (refused < 0) return null;
    const changed: Updates = new Map();
    for (let j = 0; j + 1 < conflicts.length; j += 2) {
      const project = String(conflicts[j]);
      const field = String(conflicts[j + 1]);
      const s = plan.updates.get(project)?.get(field);
      if (s) entry(changed, project, () => new Map()).set(field, s);
    }
    return { refused, changed };
  }

  async function merge(
    updates: Updates,
    refill: boolean,
    token?: string,
    prepared?: Promise<HotWritePlan>,
  ): Promise<number> {
    let left = updates;
    let refused = 0;
    for (let n = 0; left.size > 0; n++) {
      if (n === MERGE_ATTEMPTS) throw new HotCopyContendedError([...left.keys()]);
      // Writers that met on a series meet again less often when they wait apart.
      if (n > 0) await sleep(Math.random() * 5 * 2 ** n);
      // A plan read ahead is committed as if read now: a copy changed since is not overwritten
      // but merged again. One whose read failed, or too old, is read again here.
      const plan =
        (n === 0 && (await planOf(prepared, left, refill, token, now))) ||
        (await readAndMerge(left, refill, token));
      const done = await commit(plan);
      if (done === null) continue;
      refused += done.refused;
      left = done.changed;
    }
    return refused;
  }

  return {
    /** Rows ClickHouse acknowledged, per project and series. Returns the series refused. */
    write: (updates, token, prepared) => merge(updates, false, token, prepared),
    /** Reads and merges a write ahead of time (nothing written): its write's `prepared`. */
    prepare: (updates, token) => readAndMerge(updates, false, token),
    /** A project's whole copy, from ClickHouse; marks it ready. Over the cap, the newest stay. */
    refill: (project: string, series: Map<string, HotSeries>) => {
      const newestFirst = [...series].sort(([, a], [, b]) => b.ls - a.ls);
      return merge(new Map([[project, new Map(newestFirst)]]), true);
    },
    /** The projects' copies are not whole any more: their next read refills them. */
    async invalidate(projects: Iterable<string>): Promise<void> {
      const list = [...projects];
      if (list.length === 0) return;
      await redis.del(...list.map((p) => k.ready(p)));
      await redis.publish(
        k.versions,
        JSON.stringify(Object.fromEntries(list.map((p) => [p, null]))),
      );
    },
    /**
     * The version of a project's copy (moved on by every write), and the copy itself unless it
     * is the version `held` (an answer the reader has): one round trip.
     */
    async snapshot(project: string, held: string | null): Promise<HotSnapshot> {
      const [version, flat] = await redis.headroomHotSnapshot(
        k.ready(project),
        k.series(project),
        held ?? "",
      );
      if (version === undefined) return { version: null };
      if (flat === undefined) return { version };
      let bytes = 0;
      for (const text of flat) bytes += text.length;
      return { version, series: parseSeries(pairs(flat)), bytes };
    },
    /** A project's series, or null when its copy is not whole (never refilled since lost). */
    async read(project: string): Promise<Map<string, HotSeries> | null> {
      const results = await redis
        .pipeline()
        .exists(k.ready(project))
        .hgetall(k.series(project))
        .exec();
      const [exists, all] = (results ?? []) as [Error | null, unknown][];
      if (!exists || !all) throw new Error("hot headroom: the pipeline gave no replies");
      if (exists[0]) throw exists[0];
      if (all[0]) throw all[0];
      if (exists[1] !== 1) return null;
      return parseSeries(Object.entries(all[1] as Record<string, string>));
    },
  };
}
