import type { Result } from "ioredis";
import { HISTORY_WINDOW_MS } from "../alerts/burn-rate.js";
import type { RedisClient } from "../redis/connections.js";
import { FUTURE_BUCKETS_PER_KIND, KEEP_MS } from "../alerts/counted-windows.js";
import { type HotSeries, MAX_WINDOWS_PER_SERIES, MIN_GAP_MS } from "./hot-series.js";

// The hot headroom in Redis: per project a hash of series → HotSeries JSON, written by the ingest
// workers after ClickHouse took a batch (one script call per batch), read by /api/v1/headroom in
// one round trip. Merging is commutative (the newest figures win by timestamp, then report id;
// points are a sorted union), so a worker's write and a reader's refill from ClickHouse may
// interleave in any order, and a redelivered batch changes nothing.
//
// Bounded like the alerts' series state: a sorted set per project of series by last write admits
// a new series only under the cap, and series not written for the TTL are dropped (a bounded
// number per call). A `ready` key says the project's copy is whole (refilled from ClickHouse
// since Redis last lost it); without it the reader refills first.
//
// Keys live under the queue prefix and share its hash tag: one Cluster slot, as a script that
// touches several projects needs.

/** Points kept per series and metric: enough for the alerts' burn rate (8 points, 5 minutes). */
export const HOT_POINTS = 16;
/** Expired series dropped per project per call: bounded work; the rest go at later calls. */
const PRUNE_PER_CALL = 100;
/**
 * How long a batch's counted token is kept: past any redelivery of it (a batch is delivered again
 * within its manifest's life, minutes), and past the Pacific day the longest fixed count spans.
 */
export const COUNTED_TOKEN_MS = 48 * 3_600_000;

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

// KEYS: the batch's counted-token key, then per project its series hash, seen set, ready key.
// ARGV: now, TTL (ms), cap, prune limit, points kept, min gap, history window, refill ('1': also
// set ready), the versions channel, how long a batch's token is kept ('' for a write without
// one: its counts are not added), then per project its id, a count n and n × (field, JSON, score). Returns the number of series
// refused by the cap. Publishes {project: version} on the channel (hot-versions.ts); null for a
// project whose copy is not whole.
const MERGE = `
local now, ttl, cap, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local keep, gap, window, refill = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
local channel, versions = ARGV[9], {}
-- Counts are added once per batch: its token (KEYS[1]) is claimed with the writes, never without
-- a token, nor on a refill. Redis does not roll a script back: everything that can fail (a stored
-- series that does not decode) runs before the first write, so a failed call claims and writes
-- nothing, and its retry counts the batch.
local count = false
if not refill and ARGV[10] ~= '' then count = redis.call('EXISTS', KEYS[1]) == 0 end
local kept_ms = {m = ${KEEP_MS.m}, h = ${KEEP_MS.h}, d = ${KEEP_MS.d}, p = ${KEEP_MS.p}, M = ${KEEP_MS.M}}
local function newer(t, id, t0, id0)
  return t0 == nil or t > t0 or (t == t0 and (id or '') > (id0 or ''))
end
local function before(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end
local function in_order(list)
  for i = 2, #list do
    if before(list[i], list[i - 1]) then return false end
  end
  return true
end
-- Both lists come sorted (the stored one by this script, a batch's by hot-series.ts): merged in
-- one pass, since a sort of a large batch's points held Redis for tens of milliseconds. Any
-- other input is sorted whole, to the same order.
local function union(a, b)
  local all = {}
  if in_order(a) and in_order(b) then
    local i, j = 1, 1
    while i <= #a or j <= #b do
      if j > #b or (i <= #a and not before(b[j], a[i])) then
        all[#all + 1] = a[i]
        i = i + 1
      else
        all[#all + 1] = b[j]
        j = j + 1
      end
    end
    return all
  end
  for _, p in ipairs(a) do all[#all + 1] = p end
  for _, p in ipairs(b) do all[#all + 1] = p end
  table.sort(all, before)
  return all
end
local function merge_points(a, b)
  local all = union(a or {}, b or {})
  local out = {}
  for _, p in ipairs(all) do
    local last = out[#out]
    if last and last[1] == p[1] and last[2] == p[2] then
    elseif last and #out > 1 and p[1] - last[1] < gap then out[#out] = p
    else out[#out + 1] = p end
  end
  local newest = out[#out]
  local kept = {}
  for _, p in ipairs(out) do
    if p[1] >= newest[1] - window then kept[#kept + 1] = p end
  end
  local from = math.max(1, #kept - keep + 1)
  local res = {}
  for i = from, #kept do res[#res + 1] = kept[i] end
  return res
end
-- Per window key, the newer of the kept and the incoming figures; new windows while fewer than a
-- series keeps.
local function newest_per_window(kept_all, incoming)
  if type(kept_all) ~= 'table' then kept_all = {} end
  local n = 0
  for _ in pairs(kept_all) do n = n + 1 end
  for key, fig in pairs(incoming) do
    local kept = kept_all[key]
    if kept then
      if newer(fig[1], fig[2], kept[1], kept[2]) then kept_all[key] = fig end
    elseif n < ${MAX_WINDOWS_PER_SERIES} then
      kept_all[key] = fig
      n = n + 1
    end
  end
  return kept_all
end

local function merge(old, new)
  if not old then old = {p = {}} end
  local s = old
  s.ls = math.max(old.ls or new.ls, new.ls)
  if new.la and newer(new.la, new.li, old.la, old.li) then s.la, s.li, s.l = new.la, new.li, new.l end
  if new.ca and newer(new.ca, new.ci, old.ca, old.ci) then s.ca, s.ci, s.c = new.ca, new.ci, new.c end
  -- The pool: the newest report's (hot-series.ts, HotSeries.g).
  if type(new.g) == 'table' and (type(s.g) ~= 'table' or newer(new.g[1], new.g[2], s.g[1], s.g[2])) then
    s.g = new.g
  end
  -- A pool-wide rate limit: the newest report's; the newest report that was no rate limit.
  if type(new.x) == 'table' and (type(s.x) ~= 'table' or newer(new.x[1], new.x[2], s.x[1], s.x[2])) then
    s.x = new.x
  end
  if type(new.o) == 'number' and (type(s.o) ~= 'number' or new.o > s.o) then s.o = new.o end
  -- Learned limits: the newest per window, as many windows as a series keeps.
  if type(new.lw) == 'table' then s.lw = newest_per_window(s.lw, new.lw) end
  -- Counted use: each bucket added to (a batch counted once), those past their kind's span dropped.
  if count and type(new.k) == 'table' then
    if type(s.k) ~= 'table' then s.k = {} end
    for key, b in pairs(new.k) do
      local kept = s.k[key]
      if type(kept) == 'table' then
        for i = 1, 4 do kept[i] = (tonumber(kept[i]) or 0) + (tonumber(b[i]) or 0) end
        kept[5] = math.max(tonumber(kept[5]) or 0, tonumber(b[5]) or 0)
      else
        s.k[key] = b
      end
    end
  end
  if type(s.k) == 'table' then
    local any, ahead = false, {}
    for key, _ in pairs(s.k) do
      local kind = string.sub(key, 1, 1)
      local span, start = kept_ms[kind], tonumber(string.sub(key, 3))
      if not span or not start or start < now - span then
        s.k[key] = nil
      else
        any = true
        if start > now then
          ahead[kind] = ahead[kind] or {}
          table.insert(ahead[kind], {start, key})
        end
      end
    end
    -- Of the buckets ahead of now, the nearest few of each kind (counted-windows.ts pruneCounts).
    for _, list in pairs(ahead) do
      if #list > ${FUTURE_BUCKETS_PER_KIND} then
        table.sort(list, function(a, b) return a[1] < b[1] end)
        for i = ${FUTURE_BUCKETS_PER_KIND} + 1, #list do s.k[list[i][2]] = nil end
      end
    end
    if not any then s.k = nil end
  end
  if type(s.p) ~= 'table' then s.p = {} end
  for _, m in ipairs({'requests', 'tokens', 'credits'}) do
    local a, b = s.p[m], new.p and new.p[m]
    if type(b) == 'table' and #b > 0 then s.p[m] = merge_points(a, b) end
  end
  -- Windows: the newest figures per window; a window the batch does not carry keeps its own.
  if type(new.w) == 'table' then s.w = newest_per_window(s.w, new.w) end
  if type(new.wp) == 'table' and type(s.w) == 'table' then
    if type(s.wp) ~= 'table' then s.wp = {} end
    for key, b in pairs(new.wp) do
      if s.w[key] and type(b) == 'table' and #b > 0 then s.wp[key] = merge_points(s.wp[key], b) end
    end
  end
  return s
end
local refused = 0
local a = 11
-- First every merge, with no write: the series each project drops (expired) and keeps.
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
    local field, json, score = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
    local seen = nil
    if not gone[field] then seen = redis.call('ZSCORE', zkey, field) end
    if score < now - ttl then
    elseif seen or card < cap then
      local prev = nil
      if not gone[field] then prev = redis.call('HGET', hkey, field) end
      local s = merge(prev and cjson.decode(prev) or nil, cjson.decode(json))
      table.insert(plan.writes, {field, cjson.encode(s), score, seen})
      if not seen then card = card + 1 end
    else
      refused = refused + 1
    end
  end
  plans[#plans + 1] = plan
end
if count then redis.call('SET', KEYS[1], '1', 'PX', tonumber(ARGV[10])) end
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
  -- to an old number), a write moves it on, and only a whole copy has one.
  if refill then redis.call('SET', rkey, ARGV[1], 'PX', ttl)
  elseif redis.call('EXISTS', rkey) == 1 then
    redis.call('INCR', rkey)
    redis.call('PEXPIRE', rkey, ttl)
  end
  versions[plan.project] = redis.call('GET', rkey) or cjson.null
end
redis.call('PUBLISH', channel, cjson.encode(versions))
return refused
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
    headroomHotMerge(...args: (string | number)[]): Result<number, Context>;
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
  write(updates: Map<string, Map<string, HotSeries>>, token?: string): Promise<number>;
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
  if (!redis.headroomHotMerge) redis.defineCommand("headroomHotMerge", { lua: MERGE });
  if (!redis.headroomHotSnapshot) {
    redis.defineCommand("headroomHotSnapshot", { numberOfKeys: 2, lua: SNAPSHOT });
  }
  const k = hotKeys(prefix);
  const now = opts.now ?? Date.now;

  async function merge(
    updates: Map<string, Map<string, HotSeries>>,
    refill: boolean,
    token?: string,
  ): Promise<number> {
    if (updates.size === 0) return 0;
    const t = now();
    const keys: string[] = [k.counted(token ?? "")];
    const args: (string | number)[] = [
      t,
      opts.ttlMs,
      opts.maxSeriesPerProject,
      PRUNE_PER_CALL,
      HOT_POINTS,
      MIN_GAP_MS,
      HISTORY_WINDOW_MS,
      refill ? "1" : "0",
      k.versions,
      token === undefined ? "" : COUNTED_TOKEN_MS,
    ];
    for (const [project, series] of updates) {
      keys.push(k.series(project), k.seen(project), k.ready(project));
      args.push(project, series.size);
      // A worker's write is a use of the series now; a refill keeps its last report's time, so
      // a series idle past the TTL is not brought back.
      for (const [field, s] of series) {
        args.push(field, JSON.stringify(s), refill ? Math.min(s.ls, t) : t);
      }
    }
    return redis.headroomHotMerge(keys.length, ...keys, ...args);
  }

  return {
    /** Rows ClickHouse acknowledged, per project and series. Returns the series refused. */
    write: (updates: Map<string, Map<string, HotSeries>>, token?: string) =>
      merge(updates, false, token),
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
