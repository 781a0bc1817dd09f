import type { Result } from "ioredis";
import type { RedisClient } from "../redis/connections.js";

// The burst limit as a token bucket in Redis, shared by every edge: it refills at `rate` tokens a
// second up to `capacity`, so a client's start-up burst (one provider hint per provider, all at
// once) passes while a sustained flood is held to `rate`. Time is Redis's own clock, so edges
// whose clocks disagree still share one bucket. A take asks for several tokens at once and gets
// what is there, so an edge can keep a few for the next reports without a round trip each; it
// gives back with it the tokens it took earlier and did not spend in time.

export interface BucketTake {
  /** Tokens given, 0 to `want`. */
  granted: number;
  /** Whole tokens left in the bucket. */
  remaining: number;
  /** Until the next whole token, when none is left. */
  msToNext: number;
}

export type TakeTokens = (
  key: string,
  rate: number,
  capacity: number,
  want: number,
  back: number,
) => Promise<BucketTake>;

const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate, cap, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local back = tonumber(ARGV[4])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or cap
local at = tonumber(b[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - at) * rate / 1000 + back)
local granted = math.min(want, math.floor(tokens))
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) / rate * 1000) + 1000)
local toNext = 0
if tokens < 1 then toNext = math.ceil((1 - tokens) / rate * 1000) end
return {granted, math.floor(tokens), toNext}
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomTakeTokens(
      key: string,
      rate: number,
      capacity: number,
      want: number,
      back: number,
    ): Result<[number, number, number], Context>;
  }
}

export function redisTokenBucket(redis: RedisClient, prefix: string): TakeTokens {
  return async (key, rate, capacity, want, back) => {
    // Defined at first use: an edge that only refuses bad keys never touches Redis.
    if (!redis.headroomTakeTokens) {
      redis.defineCommand("headroomTakeTokens", { numberOfKeys: 1, lua: TAKE });
    }
    const [granted, remaining, msToNext] = await redis.headroomTakeTokens(
      `${prefix}:bucket:${key}`,
      rate,
      capacity,
      want,
      back,
    );
    return { granted, remaining, msToNext };
  };
}
