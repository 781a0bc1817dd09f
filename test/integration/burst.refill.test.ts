import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { redisTokenBucket } from "../../src/limits/token-bucket.js";
import { clientReport, type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { redisNow, untilRedisMs } from "../helpers/redis-clock.js";

// The token bucket's refill rate, bounded from both sides: an empty bucket is left alone for a
// measured while (by Redis's clock, which the bucket's script reads) and what came back must be
// what the rate gives for that while, give or take the round trips around each take. Tests that
// only drain a bucket finish before its next token, so they cannot see a bucket refilling ten
// times too fast; these can. Reports of the edge: the bucket itself, and a batch over HTTP.

const WINDOW_MS = 1_500;

let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});

afterAll(() => {
  redis?.disconnect();
});

/** Whole tokens a bucket of `rate` a second gains between two instants (ms). */
const due = (rate: number, fromMs: number, toMs: number) =>
  Math.floor(((toMs - fromMs) * rate) / 1000);

describe("the token bucket refills at its rate", () => {
  for (const rate of [20, 50]) {
    it(`rate ${rate}/s: an emptied bucket gives back what ${WINDOW_MS} ms of Redis time are worth`, async () => {
      const take = redisTokenBucket(redis, `t-refill-${uniqueId()}`);
      // Ten times the rate over the window fits in the bucket: a refill too fast shows in full.
      const capacity = rate * 20;
      const before = await redisNow(redis);
      const emptied = await take("p", rate, capacity, capacity, 0);
      const emptiedBy = await redisNow(redis);
      expect(emptied).toMatchObject({ granted: capacity, remaining: 0 });

      await untilRedisMs(redis, emptiedBy + WINDOW_MS);
      const from = await redisNow(redis);
      const back = await take("p", rate, capacity, capacity, 0);
      const to = await redisNow(redis);
      // The script read the clock once per take, inside each pair of readings here.
      expect(back.granted).toBeGreaterThanOrEqual(due(rate, emptiedBy, from));
      expect(back.granted).toBeLessThanOrEqual(due(rate, before, to));
      expect(back.remaining).toBe(0);
      expect(back.msToNext).toBeGreaterThan(0);
      expect(back.msToNext).toBeLessThanOrEqual(Math.ceil(1000 / rate));
    });
  }
});

describe("the edge's burst limit refills at the plan's rate", () => {
  let fx: EdgeFixture;

  beforeAll(async () => {
    fx = await startEdge();
  });

  afterAll(async () => {
    await fx?.close();
  });

  const batch = (key: string, n: number) =>
    fx.post(
      Array.from({ length: n }, () => clientReport()),
      { key, url: "/api/reports" },
    );
  const accepted = (res: Awaited<ReturnType<typeof batch>>) => {
    if (res.statusCode === 429) return 0;
    expect([200, 207], res.body).toContain(res.statusCode);
    return (res.json().results as Record<string, unknown>[]).filter((r) => "id" in r).length;
  };

  for (const rate of [10, 40]) {
    it(`burst ${rate}/s: a batch after ${WINDOW_MS} ms passes what the rate refilled, no more`, async () => {
      // Large enough that ten times the rate over the window would not be capped by its size.
      const capacity = rate * 20;
      const k = await fx.createKey({
        plan: "pro",
        overrides: { monthly: null, burst: rate, capacity },
      });
      // One batch over the bucket's size empties it: the edge asks for all of it in one take.
      const before = await redisNow(redis);
      expect(accepted(await batch(k.key, capacity + 5))).toBe(capacity);
      const emptiedBy = await redisNow(redis);

      await untilRedisMs(redis, emptiedBy + WINDOW_MS);
      const from = await redisNow(redis);
      const passed = accepted(await batch(k.key, capacity));
      const to = await redisNow(redis);
      expect(passed).toBeGreaterThanOrEqual(due(rate, emptiedBy, from));
      expect(passed).toBeLessThanOrEqual(due(rate, before, to));
    });
  }
});
