import type { Redis } from "ioredis";

// Redis's own clock, which the limiter scripts read (TIME), to the millisecond as they read it:
// a test that bounds what a script did by the time that passed measures it on the same clock.

/** Redis's TIME in ms, truncated as the scripts truncate it. */
export async function redisNow(redis: Pick<Redis, "time">): Promise<number> {
  const [sec, usec] = await redis.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** Returns once Redis's clock reads `ms` or later (polled, so a loaded machine only waits longer). */
export async function untilRedisMs(
  redis: Pick<Redis, "time">,
  ms: number,
  intervalMs = 20,
): Promise<number> {
  for (;;) {
    const now = await redisNow(redis);
    if (now >= ms) return now;
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, ms - now)));
  }
}
