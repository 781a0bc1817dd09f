import type { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_PLANS } from "../../src/config.js";
import { createLimits, effectivePlan, monthOf, nextMonthStart } from "../../src/edge/limits.js";
import { HttpError } from "../../src/http/errors.js";
import type { KeyLookup } from "../../src/keys/key-store.js";

// Plan resolution, the monthly reset, and the in-process limiter of failed authentications (the
// Redis-backed burst and quota limiters are covered by the integration tests).

const DAY_S = 24 * 60 * 60;

const lookup = (plan: string, overrides: KeyLookup["overrides"] = {}): KeyLookup => ({
  keyId: "key_1",
  projectId: "prj_1",
  scope: "report",
  plan,
  overrides,
});

/** A Redis that fails the test if anything touches it: auth failures must cost no Redis call. */
const untouchableRedis = new Proxy(
  {},
  {
    get(_, name) {
      throw new Error(`redis.${String(name)} was used`);
    },
  },
) as Redis;

afterEach(() => {
  vi.useRealTimers();
});

describe("effectivePlan", () => {
  it("takes the project's plan, with its overrides on top", () => {
    expect(effectivePlan(DEFAULT_PLANS, lookup("pro"))).toEqual({
      monthly: 50_000,
      burst: 200,
      capacity: 1_000,
    });
    // A rate of its own gets a bucket to match (5 × the rate), unless its size is set too.
    expect(effectivePlan(DEFAULT_PLANS, lookup("pro", { burst: 500 }))).toEqual({
      monthly: 50_000,
      burst: 500,
      capacity: 2_500,
    });
    expect(effectivePlan(DEFAULT_PLANS, lookup("pro", { burst: 500, capacity: 600 }))).toEqual({
      monthly: 50_000,
      burst: 500,
      capacity: 600,
    });
    expect(effectivePlan(DEFAULT_PLANS, lookup("free", { monthly: null }))).toEqual({
      monthly: null,
      burst: 10,
      capacity: 50,
    });
  });

  it("falls back to the free plan for a plan that is not configured", () => {
    const plans = { ...DEFAULT_PLANS, free: { monthly: 100, burst: 3 } };
    expect(effectivePlan(plans, lookup("enterprise"))).toEqual({
      monthly: 100,
      burst: 3,
      capacity: 15,
    });
    expect(effectivePlan(plans, lookup("enterprise", { burst: 7 }))).toEqual({
      monthly: 100,
      burst: 7,
      capacity: 35,
    });
  });

  it("falls back to the contract's free numbers when no free plan is configured", () => {
    const plans = { pro: DEFAULT_PLANS.pro };
    expect(effectivePlan(plans, lookup("gone"))).toEqual({
      monthly: 3_000,
      burst: 10,
      capacity: 50,
    });
  });
});

describe("nextMonthStart", () => {
  it("is the first instant of the month after", () => {
    expect(nextMonthStart("2024-01")).toBe(Date.UTC(2024, 1, 1));
    expect(nextMonthStart("2024-04")).toBe(Date.UTC(2024, 4, 1));
  });

  it("ends December at the first of January of the next year", () => {
    expect(nextMonthStart("2023-12")).toBe(Date.UTC(2024, 0, 1));
  });

  it("knows leap Februaries", () => {
    expect(nextMonthStart("2024-02") - Date.UTC(2024, 1, 1)).toBe(29 * DAY_S * 1000);
    expect(nextMonthStart("2023-02") - Date.UTC(2023, 1, 1)).toBe(28 * DAY_S * 1000);
  });

  it("names the month of an instant in UTC", () => {
    expect(monthOf(Date.UTC(2023, 11, 31, 23, 59, 59, 999))).toBe("2023-12");
    expect(monthOf(Date.UTC(2024, 0, 1))).toBe("2024-01");
  });
});

describe("failed authentications per IP", () => {
  const limits = (perIp: number, windowS: number) =>
    createLimits({
      redis: untouchableRedis,
      plans: DEFAULT_PLANS,
      authFailuresPerIp: perIp,
      authFailureWindowS: windowS,
    });

  function refusal(check: () => void): HttpError {
    let err: unknown = null;
    try {
      check();
    } catch (e) {
      err = e;
    }
    if (!(err instanceof HttpError)) throw new Error(`expected an HttpError, got ${String(err)}`);
    return err;
  }

  it("lets an IP through until it has failed the allowed number of times", async () => {
    const l = limits(3, 60);
    for (let i = 0; i < 2; i++) l.recordAuthFailure("10.0.0.1");
    expect(() => l.checkAuthFailures("10.0.0.1")).not.toThrow();
    l.recordAuthFailure("10.0.0.1");
    const err = refusal(() => l.checkAuthFailures("10.0.0.1"));
    expect(err.code).toBe("rate_limited");
    expect(err.status).toBe(429);
    expect(() => l.checkAuthFailures("10.0.0.2")).not.toThrow();
  });

  it("answers with the limit, what remains and when it resets, in body and headers", async () => {
    vi.useFakeTimers({ now: Date.UTC(2024, 4, 1, 12) });
    const l = limits(2, 60);
    l.recordAuthFailure("10.0.0.1");
    l.recordAuthFailure("10.0.0.1");
    l.recordAuthFailure("10.0.0.1");
    await vi.advanceTimersByTimeAsync(10_700);
    const err = refusal(() => l.checkAuthFailures("10.0.0.1"));
    expect(err.toBody()).toEqual({
      error: "rate_limited",
      message: "too many failed authentication attempts",
      limit: 2,
      remaining: 0,
      reset_at: new Date(Date.UTC(2024, 4, 1, 12, 1)).toISOString(),
    });
    expect(err.extra.headers).toEqual({
      "retry-after": 50,
      "ratelimit-limit": 2,
      "ratelimit-remaining": 0,
      "ratelimit-reset": 50,
    });
  });

  it("forgets the failures once the window has passed", async () => {
    vi.useFakeTimers({ now: Date.UTC(2024, 4, 1, 12) });
    const l = limits(1, 30);
    l.recordAuthFailure("10.0.0.1");
    expect(() => l.checkAuthFailures("10.0.0.1")).toThrow(HttpError);
    await vi.advanceTimersByTimeAsync(30_001);
    expect(() => l.checkAuthFailures("10.0.0.1")).not.toThrow();
  });
});
