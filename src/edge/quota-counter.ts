import { createHash } from "node:crypto";
import type { RedisClient } from "../redis/connections.js";

// The monthly quota in Redis, shared by every edge: one Lua script over two keys of one Cluster
// slot. The counter is the key rate-limiter-flexible kept (same name, a string, created with the
// month's expiry), so a month counted before this code keeps counting, and an edge of the
// previous release that still increments it during a rolling upgrade is counted too:
//
//   <prefix>:<project>:<YYYY-MM>             string  units reserved by edges: reports accepted,
//                                                    in flight, or held unused by an edge
//   {<prefix>:<project>:<YYYY-MM>}:holders   hash    edge id → "<units>:<ms>": what that edge
//                                                    still holds unused, as of Redis time <ms>
//
// The holders key's hash tag is the counter's whole name, which puts it in the counter's slot.
//
// One call does everything an edge needs: give units back, reserve more, say what it still holds,
// and, when the quota falls short, learn what other edges hold and when their lease ends (see
// quota-allowance.ts for how those are used).
//
// The month is Redis's: the script reserves units only of the month its own clock (TIME) is in,
// and expires the keys at that month's end, so an edge whose clock is a few seconds off at the
// turn of a month is told the month to ask for instead of creating a counter for the wrong one.

export interface QuotaCall {
  /** The project's monthly quota. */
  monthly: number;
  /** Units wanted, 0 for a call that only gives back or settles. */
  want: number;
  /** Of those, units for reports waiting now: granted whatever `spread` says. */
  serve: number;
  /** Unused units given back to the month. */
  giveBack: number;
  /** Unused units this edge keeps, besides what it is granted now beyond `serve`. */
  keep: number;
  /** Units beyond `serve` are granted up to 1/`spread` of what is left. */
  spread: number;
  /** How long an edge may hold units before it gives them back. */
  leaseMs: number;
  /** After its lease, how long an edge's holding still counts as coming back (it may be late). */
  graceMs: number;
}

export interface QuotaReply {
  granted: number;
  /** The month's counter after the call: accepted, in flight and held units. */
  used: number;
  /** When fewer than `want` were granted: unused units other edges hold, still on lease. */
  othersHeld: number;
  /** ... and how long until the first of those leases ends. */
  msToReturn: number;
  /** Redis's month (`YYYY-MM`) when it is not the key's: then nothing was reserved. */
  otherMonth?: string;
}

/** One call on the month `key` (`<project>:<YYYY-MM>`, the month by the edge's reckoning). */
export type QuotaStore = (key: string, edge: string, call: QuotaCall) => Promise<QuotaReply>;

const SCRIPT = `
local monthly, want, serve = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local back, keep, spread = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local lease, grace, month, edge = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9], ARGV[10]
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Days since 1970-01-01 of a date, and the month of a day (H. Hinnant's civil calendar).
local function days(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + math.floor((153 * mp + 2) / 5) + d - 1
  return era * 146097 + doe - 719468
end
local function monthOf(day)
  local z = day + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = (mp + 2) % 12 + 1
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d', y, m)
end
local current = monthOf(math.floor(sec / 86400))
if month ~= current then
  -- Another month by Redis's clock: units only go back, and the caller is told which month it is.
  want, serve = 0, 0
end
local y, m = tonumber(string.sub(month, 1, 4)), tonumber(string.sub(month, 6, 7))
if m == 12 then y, m = y + 1, 1 else m = m + 1 end
local ttl = math.max(1, days(y, m, 1) * 86400 - sec)
local used = tonumber(redis.call('GET', KEYS[1]))
if not used then
  if want == 0 then
    redis.call('HDEL', KEYS[2], edge)
    return {0, 0, 0, 0, current}
  end
  redis.call('SET', KEYS[1], 0, 'EX', ttl)
  used = 0
end
if back > 0 then used = redis.call('DECRBY', KEYS[1], math.min(back, math.max(used, 0))) end
local left = math.max(0, monthly - used)
local granted = math.min(want, left, math.max(serve, math.floor(left / spread)))
if granted > 0 then used = redis.call('INCRBY', KEYS[1], granted) end
local held = keep + math.max(0, granted - serve)
if held > 0 then
  redis.call('HSET', KEYS[2], edge, held .. ':' .. now)
  redis.call('EXPIRE', KEYS[2], ttl)
else
  redis.call('HDEL', KEYS[2], edge)
end
local others, soonest = 0, -1
if granted < want then
  local h = redis.call('HGETALL', KEYS[2])
  for i = 1, #h, 2 do
    local units, at = string.match(h[i + 1], '^(%d+):(%d+)$')
    units, at = tonumber(units), tonumber(at)
    if h[i] ~= edge and units and now - at < lease + grace then
      others = others + units
      local w = math.max(0, at + lease - now)
      if soonest < 0 or w < soonest then soonest = w end
    end
  end
end
return {granted, used, others, math.max(soonest, 0), current}
`;
const SHA = createHash("sha1").update(SCRIPT).digest("hex");

/** The counter's key and its holders' key, in the counter's Cluster slot. */
export function quotaKeys(prefix: string, key: string): [string, string] {
  const counter = `${prefix}:${key}`;
  return [counter, `${sameSlotTag(counter)}:holders`];
}

/**
 * A hash tag that puts a key in `key`'s slot: its own tag if it has one, else its whole name.
 * A name with a `}` but no tag cannot be matched (its slot is its whole name, braces included).
 */
function sameSlotTag(key: string): string {
  const open = key.indexOf("{");
  const close = open < 0 ? -1 : key.indexOf("}", open + 1);
  if (close > open + 1) return key;
  if (key.includes("}")) throw new Error(`no key can share a Cluster slot with "${key}"`);
  return `{${key}}`;
}

export function redisQuotaStore(redis: RedisClient, prefix: string): QuotaStore {
  quotaKeys(prefix, "project:2000-01"); // a prefix no key can share a slot with fails here
  return async (key, edge, c) => {
    const month = key.slice(-"YYYY-MM".length);
    const args = [
      ...quotaKeys(prefix, key),
      c.monthly,
      c.want,
      c.serve,
      c.giveBack,
      c.keep,
      c.spread,
      c.leaseMs,
      c.graceMs,
      month,
      edge,
    ];
    // EVALSHA, and EVAL once when Redis does not know the script yet (NOSCRIPT: nothing ran).
    // Plain commands rather than defineCommand: the edge's client pipelines them automatically.
    const reply = (await redis.evalsha(SHA, 2, ...args).catch((err: unknown) => {
      if (err instanceof Error && err.message.startsWith("NOSCRIPT")) {
        return redis.eval(SCRIPT, 2, ...args);
      }
      throw err;
    })) as [number, number, number, number, string];
    const [granted, used, othersHeld, msToReturn, current] = reply;
    return current === month
      ? { granted, used, othersHeld, msToReturn }
      : { granted, used, othersHeld, msToReturn, otherMonth: current };
  };
}
