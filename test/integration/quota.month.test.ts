import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { DEFAULT_PLANS } from "../../src/config.js";
import { createLimits } from "../../src/edge/limits.js";
import { type QuotaCall, quotaKeys, redisQuotaStore } from "../../src/edge/quota-counter.js";
import type { KeyLookup } from "../../src/keys/key-store.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { notAtMonthEnd } from "../helpers/month-end.js";
import { redisNow as redisMs } from "../helpers/redis-clock.js";

// The quota's month is Redis's, not the edge's: an edge whose clock is in another month (here,
// 40 days off either way, which is another month on any date) counts its reports in the month
// Redis's clock is in, and never creates a counter for its own.

const DAY_MS = 24 * 60 * 60 * 1000;
let redis: Redis;

const monthOf = (ms: number) => new Date(ms).toISOString().slice(0, 7);
const nextMonthStart = (month: string) =>
  Date.UTC(Number(month.slice(0, 4)), Number(month.slice(5, 7)), 1);

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});

afterAll(() => {
  redis?.disconnect();
});

afterEach(() => {
  vi.useRealTimers();
});

const redisNow = () => redisMs(redis);

const call: QuotaCall = {
  monthly: 100,
  want: 5,
  serve: 1,
  giveBack: 0,
  keep: 0,
  spread: 1,
  leaseMs: 1_000,
  graceMs: 2_000,
};

describe("the quota's month is Redis's", () => {
  for (const skewDays of [-40, 40]) {
    it(`an edge ${Math.abs(skewDays)} days ${skewDays < 0 ? "slow" : "fast"} counts in Redis's month`, async () => {
      await notAtMonthEnd(redisNow);
      const prefix = `t-month-${uniqueId()}`;
      // This process's clock is the edge's (timers stay real: Redis's client needs them).
      vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + skewDays * DAY_MS });
      const limits = createLimits({
        redis,
        plans: DEFAULT_PLANS,
        prefix,
        authFailuresPerIp: 10,
        authFailureWindowS: 60,
      });
      const lookup: KeyLookup = {
        keyId: "k",
        projectId: "p",
        scope: "report",
        plan: "free",
        overrides: {},
      };
      try {
        for (let i = 0; i < 3; i++) await limits.consumeQuota(lookup);
        const now = await redisNow();
        const [counter] = quotaKeys(`${prefix}:quota`, `p:${monthOf(now)}`);
        const [edgeCounter] = quotaKeys(`${prefix}:quota`, `p:${monthOf(now + skewDays * DAY_MS)}`);
        expect(Number(await redis.get(counter))).toBeGreaterThanOrEqual(3);
        expect(await redis.exists(edgeCounter as string)).toBe(0);
        // The counter expires at the end of Redis's month.
        const ttl = await redis.ttl(counter as string);
        expect(ttl).toBeLessThanOrEqual(Math.ceil((nextMonthStart(monthOf(now)) - now) / 1000));
        expect(ttl).toBeGreaterThan((nextMonthStart(monthOf(now)) - now) / 1000 - 30);
      } finally {
        await limits.close();
      }
    });
  }

  it("a reservation for another month is refused untouched, with Redis's month named", async () => {
    await notAtMonthEnd(redisNow);
    const prefix = `t-month-${uniqueId()}`;
    const store = redisQuotaStore(redis, prefix);
    const now = await redisNow();
    for (const other of [monthOf(now - 40 * DAY_MS), monthOf(now + 40 * DAY_MS)]) {
      const reply = await store(`p:${other}`, "e1", call);
      expect(reply).toMatchObject({ granted: 0, otherMonth: monthOf(now) });
      const [counter, holders] = quotaKeys(prefix, `p:${other}`);
      expect(await redis.exists(counter as string, holders as string)).toBe(0);
    }
    expect(await store(`p:${monthOf(now)}`, "e1", call)).toEqual({
      granted: 5,
      used: 5,
      othersHeld: 0,
      msToReturn: 0,
    });
  });

  it("keys expire at the end of their month, whichever month it is", async () => {
    const prefix = `t-month-${uniqueId()}`;
    const store = redisQuotaStore(redis, prefix);
    // Units held for a month ahead (an edge giving back what it kept) set the holders' expiry
    // from the script's own calendar: checked against JavaScript's for months up to 2399.
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 12 * 370 }), async (ahead) => {
        const now = await redisNow();
        const start = new Date(now);
        const month = monthOf(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + ahead, 1));
        const [counter, holders] = quotaKeys(prefix, `p:${month}`);
        await redis.set(counter as string, 0);
        await store(`p:${month}`, "e1", { ...call, want: 0, serve: 0, keep: 1 });
        const ttl = await redis.ttl(holders as string);
        const expected = (nextMonthStart(month) - now) / 1000;
        expect(Math.abs(ttl - expected)).toBeLessThanOrEqual(2);
        await redis.del(counter as string, holders as string);
      }),
      { numRuns: 60 },
    );
  });
});
