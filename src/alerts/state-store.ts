import type { Result } from "ioredis";
import type { RedisClient } from "../redis/connections.js";
import { alertKeys } from "./keys.js";

// Series states in Redis, updated optimistically: read every state a batch touches (one round
// trip), compute the next states in the process (evaluate-series.ts, pure), then write them in
// one Lua call that checks nothing changed in between (compare-and-set on the exact text read).
// Two workers evaluating the same series at once cannot both fire: the second one's write is
// refused, and it reads and computes again.
//
// The events a batch produced are written by the same call, atomically with the states, into
// the batch's outbox. An evaluation of the same batch that finds the outbox (a redelivered job)
// takes those events as they are instead of evaluating again: the events are never lost between
// the state change and their delivery, and never produced twice.
//
// Series are bounded: the clients choose `app` names, and every new name is a new series. The
// read admits a series the rule does not track yet only while the rule and its project are under
// their caps (a sorted set of series by last write, each); a series not written for the TTL is
// dropped, at the next read of its project. A refused series is not evaluated at all.
//
// A rule removed (no longer in the rule index) is skipped by the read and makes the write a
// conflict: a worker's rule cache, or an evaluation job's copy of the rules, can name it for a
// few seconds more, and must neither bring its series back nor fire its events.

/** A state hash field: the rule's state key and the series' field in it. */
export interface StateRef {
  ruleId: string;
  project: string;
  field: string;
  /** Read only if the rule tracks it already: never admitted (a new series) by this read. */
  peek?: boolean;
}

export interface StateWrite extends StateRef {
  /** The exact text read (null: there was none). */
  prev: string | null;
  next: string;
}

export type CommitResult =
  | { ok: true }
  | { ok: false; conflict: true }
  | { ok: false; outbox: string };

export interface StateStoreOptions {
  /** Series one rule tracks at most. */
  maxSeriesPerRule: number;
  /** Series all rules of one project track at most. */
  maxSeriesPerProject: number;
  /** A series not written for this long starts afresh and frees its place. */
  ttlMs?: number;
  now?: () => number;
}

/** A series nobody reported on for this long starts afresh. */
export const SERIES_TTL_MS = 30 * 86_400_000;
/** Expired series dropped per project per read: bounded work; the rest go at later reads. */
const PRUNE_PER_READ = 100;

// KEYS: outbox, the batch's applied mark. ARGV: now, TTL (ms), cap per rule, cap per project,
// state/series/project-series key prefixes, prune limit, rule index, then per series: rule id,
// project, field, '1' to peek (read only if tracked). Returns the outbox (then nothing else), or
// nil, whether the batch is marked applied (1 or 0), then one entry per series: its state (nil:
// none), 0 (refused) or -1 (its rule is removed).
const READ = `
local existing = redis.call('GET', KEYS[1])
if existing then return {existing} end
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local perRule, perProject = tonumber(ARGV[3]), tonumber(ARGV[4])
local sp, rp, pp, limit, index = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]), ARGV[9]
local pruned, live = {}, {}
local out = {false, redis.call('EXISTS', KEYS[2])}
for i = 10, #ARGV, 4 do
  local rule, project, field, peek = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3] == '1'
  local rkey, pkey = rp .. rule, pp .. project
  if not pruned[project] then
    pruned[project] = true
    local old = redis.call('ZRANGEBYSCORE', pkey, '-inf', '(' .. (now - ttl), 'LIMIT', 0, limit)
    for _, member in ipairs(old) do
      local sep = string.find(member, ' ', 1, true)
      local r, f = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
      redis.call('HDEL', sp .. r, f)
      redis.call('ZREM', rp .. r, f)
      redis.call('ZREM', pkey, member)
    end
  end
  if live[rule] == nil then live[rule] = redis.call('HEXISTS', index, rule) == 1 end
  if not live[rule] then
    out[#out + 1] = -1
  elseif redis.call('ZSCORE', rkey, field) then
    out[#out + 1] = redis.call('HGET', sp .. rule, field) or false
  elseif peek then
    out[#out + 1] = false
  elseif redis.call('ZCARD', rkey) < perRule and redis.call('ZCARD', pkey) < perProject then
    redis.call('ZADD', rkey, now, field)
    redis.call('ZADD', pkey, now, rule .. ' ' .. field)
    redis.call('PEXPIRE', rkey, ttl)
    redis.call('PEXPIRE', pkey, ttl)
    out[#out + 1] = redis.call('HGET', sp .. rule, field) or false
  else
    out[#out + 1] = 0
  end
end
return out
`;

// KEYS: outbox, the batch's applied mark, then one state hash per write. ARGV: outbox text (''
// for none), now, TTL (ms), series/project-series key prefixes, rule index, how long to mark the
// batch applied ('' not to), then per write: field, previous text ('' for none), next text, rule
// id, project. A write whose rule is removed is a conflict; so is marking a batch marked already
// (another worker applied it: read again, its counted samples are counted).
const COMMIT = `
local existing = redis.call('GET', KEYS[1])
if existing then return {2, existing} end
if ARGV[7] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then return {0} end
local live = {}
for i = 3, #KEYS do
  local a = 8 + (i - 3) * 5
  if (redis.call('HGET', KEYS[i], ARGV[a]) or '') ~= ARGV[a + 1] then return {0} end
  local rule = ARGV[a + 3]
  if live[rule] == nil then live[rule] = redis.call('HEXISTS', ARGV[6], rule) == 1 end
  if not live[rule] then return {0} end
end
local now, ttl, rp, pp = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
for i = 3, #KEYS do
  local a = 8 + (i - 3) * 5
  local field, rule, project = ARGV[a], ARGV[a + 3], ARGV[a + 4]
  redis.call('HSET', KEYS[i], field, ARGV[a + 2])
  redis.call('PEXPIRE', KEYS[i], ttl)
  redis.call('ZADD', rp .. rule, now, field)
  redis.call('ZADD', pp .. project, now, rule .. ' ' .. field)
  redis.call('PEXPIRE', rp .. rule, ttl)
  redis.call('PEXPIRE', pp .. project, ttl)
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'EX', 86400) end
if ARGV[7] ~= '' then redis.call('SET', KEYS[2], '1', 'PX', ARGV[7]) end
return {1}
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomAlertsRead(...args: (string | number)[]): Result<(string | number | null)[], Context>;
    headroomAlertsCommit(...args: (string | number)[]): Result<[number, string?], Context>;
  }
}

export interface StateStore {
  /**
   * The batch's outbox (if a previous evaluation left one), or the states of its series, in
   * one round trip. A series over its rule's or project's cap is refused (not tracked).
   */
  read(
    token: string,
    refs: StateRef[],
  ): Promise<{
    outbox: string | null;
    states: (string | null)[];
    refused: boolean[];
    removed: boolean[];
    /** The batch's states were committed with its mark (commit's `appliedMs`). */
    applied: boolean;
    /** The store's clock at the read, Unix ms. */
    now: number;
  }>;
  /** `appliedMs`: mark the batch applied for this long (a conflict if it is marked already). */
  commit(
    token: string,
    writes: StateWrite[],
    outbox: string | null,
    appliedMs?: number | null,
  ): Promise<CommitResult>;
  /** The batch's events are stored and queued: a later evaluation of it has nothing to send. */
  clearOutbox(token: string): Promise<void>;
}

export function createStateStore(
  redis: RedisClient,
  prefix: string,
  opts: StateStoreOptions,
): StateStore {
  if (!redis.headroomAlertsCommit) redis.defineCommand("headroomAlertsCommit", { lua: COMMIT });
  if (!redis.headroomAlertsRead) redis.defineCommand("headroomAlertsRead", { lua: READ });
  const k = alertKeys(prefix);
  const ttlMs = opts.ttlMs ?? SERIES_TTL_MS;
  const now = opts.now ?? Date.now;
  const statePrefix = k.state("");
  const seriesPrefix = k.series("");
  const projectPrefix = k.projectSeries("");
  return {
    async read(token: string, refs: StateRef[]) {
      const at = now();
      const reply = await redis.headroomAlertsRead(
        2,
        k.outbox(token),
        k.applied(token),
        at,
        ttlMs,
        opts.maxSeriesPerRule,
        opts.maxSeriesPerProject,
        statePrefix,
        seriesPrefix,
        projectPrefix,
        PRUNE_PER_READ,
        k.ruleIndex,
        ...refs.flatMap((r) => [r.ruleId, r.project, r.field, r.peek ? "1" : "0"]),
      );
      const outbox = (reply[0] as string | null) ?? null;
      const rest = outbox === null ? reply.slice(2) : [];
      return {
        outbox,
        applied: reply[1] === 1,
        now: at,
        states: rest.map((v) => (typeof v === "string" ? v : null)),
        refused: rest.map((v) => v === 0),
        removed: rest.map((v) => v === -1),
      };
    },

    async commit(
      token: string,
      writes: StateWrite[],
      outbox: string | null,
      appliedMs?: number | null,
    ): Promise<CommitResult> {
      const keys = [k.outbox(token), k.applied(token), ...writes.map((w) => k.state(w.ruleId))];
      const args = [
        outbox ?? "",
        now(),
        ttlMs,
        seriesPrefix,
        projectPrefix,
        k.ruleIndex,
        appliedMs ?? "",
        ...writes.flatMap((w) => [w.field, w.prev ?? "", w.next, w.ruleId, w.project]),
      ];
      const [code, existing] = await redis.headroomAlertsCommit(keys.length, ...keys, ...args);
      if (code === 1) return { ok: true };
      if (code === 2) return { ok: false, outbox: existing as string };
      return { ok: false, conflict: true };
    },

    async clearOutbox(token: string) {
      await redis.del(k.outbox(token));
    },
  };
}
