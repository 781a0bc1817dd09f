import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { BURST_CAPACITY_FACTOR, DEFAULT_PLANS, type Plan } from "../config.js";
import { HttpError, unavailable } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { RedisClient } from "../redis/connections.js";
import { type BurstRefusal, createBurstAllowance } from "./burst-allowance.js";
import { createQuotaAllowance, type QuotaAllowanceOptions } from "./quota-allowance.js";
import { redisQuotaStore } from "./quota-counter.js";
import { redisTokenBucket } from "./token-bucket.js";

// Per-project burst limit (reports per second) and plan quota (reports per calendar month, UTC),
// both in Redis so that every edge shares them, each reserved in chunks per edge so that a report
// rarely waits for Redis (burst-allowance.ts, quota-allowance.ts); failed authentication limited
// per client IP in process, so that guessing keys costs no Redis call.
//
// A limit that is hit is a 429; Redis failing is a 503, because an edge that cannot reach Redis
// cannot enqueue the report either.

export interface LimitsOptions {
  redis: RedisClient;
  plans: Record<string, Plan>;
  prefix?: string;
  authFailuresPerIp: number;
  authFailureWindowS: number;
  /** Share of a project's burst an edge reserves from Redis at once (see burst-allowance.ts). */
  burstShare?: number;
  /** How the monthly quota is reserved (see quota-allowance.ts). */
  quota?: Omit<QuotaAllowanceOptions, "store">;
}

export function effectivePlan(
  plans: Record<string, Plan>,
  lookup: KeyLookup,
): Plan & { capacity: number } {
  // A plan removed from the configuration falls back to the most restrictive default.
  const base = plans[lookup.plan] ?? plans.free ?? DEFAULT_PLANS.free;
  const plan = { ...base, ...lookup.overrides };
  // A project whose rate is overridden gets a bucket to match, unless its size is set too.
  const capacity =
    lookup.overrides.capacity ??
    (lookup.overrides.burst === undefined ? base.capacity : undefined) ??
    plan.burst * BURST_CAPACITY_FACTOR;
  return { ...plan, capacity: Math.max(capacity, plan.burst) };
}

export function limitHeaders(limit: number, res: RateLimiterRes) {
  const resetS = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  return {
    "retry-after": resetS,
    "ratelimit-limit": limit,
    "ratelimit-remaining": Math.max(0, res.remainingPoints),
    "ratelimit-reset": resetS,
  };
}

export function limitBody(limit: number, res: RateLimiterRes) {
  return {
    limit,
    remaining: Math.max(0, res.remainingPoints),
    reset_at: new Date(Date.now() + res.msBeforeNext).toISOString(),
  };
}

function redisFailure(err: unknown): never {
  if (err instanceof RateLimiterRes) throw new Error("unexpected limiter result");
  throw unavailable();
}

/** Seconds from now to the start of next month (UTC), when the monthly quota resets. */
export function secondsToMonthEnd(now = new Date()): number {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
}

/** The 429 once the month's quota is used up: `used` is the month's counter. */
function quotaExceeded(monthly: number, used: number, now: Date): HttpError {
  const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  const res = new RateLimiterRes(0, secondsToMonthEnd(now) * 1000, used);
  return new HttpError("quota_exceeded", `monthly quota of ${monthly} reports used up`, {
    body: {
      limit: monthly,
      remaining: 0,
      reset_at: new Date(nextMonth).toISOString(),
      used: Math.min(monthly, used),
    },
    headers: limitHeaders(monthly, res),
  });
}

export function createLimits(opts: LimitsOptions) {
  const prefix = opts.prefix ?? "headroom";
  // Both limits need a request's plan; the key cache hands out one look-up object per key for
  // its lifetime, so the plan is worked out once per look-up, not twice per request.
  const plans = new WeakMap<KeyLookup, ReturnType<typeof effectivePlan>>();
  const planOf = (lookup: KeyLookup) => {
    let plan = plans.get(lookup);
    if (!plan) {
      plan = effectivePlan(opts.plans, lookup);
      plans.set(lookup, plan);
    }
    return plan;
  };

  const burstAllowance = createBurstAllowance({
    take: redisTokenBucket(opts.redis, `${prefix}:burst`),
    share: opts.burstShare ?? 0.05,
  });

  // Keys as rate-limiter-flexible named them: <prefix>:quota:<project>:<YYYY-MM>.
  const quota = createQuotaAllowance({
    ...opts.quota,
    store: redisQuotaStore(opts.redis, `${prefix}:quota`),
  });

  const authFailures = new RateLimiterMemory({
    keyPrefix: "auth-failures",
    points: opts.authFailuresPerIp,
    duration: opts.authFailureWindowS,
  });

  const tooManyFailures = (res: RateLimiterRes) =>
    new HttpError("rate_limited", "too many failed authentication attempts", {
      body: limitBody(opts.authFailuresPerIp, res),
      headers: limitHeaders(opts.authFailuresPerIp, res),
    });

  return {
    /** 429 when this IP has failed authentication too often recently. */
    async checkAuthFailures(ip: string): Promise<void> {
      const res = await authFailures.get(ip);
      if (res && res.remainingPoints <= 0) throw tooManyFailures(res);
    },

    recordAuthFailure(ip: string): void {
      authFailures.penalty(ip, 1).catch(() => {});
    },

    /**
     * Takes one of this IP's failures before the attempt is known to fail, so that attempts made
     * at once cannot outrun the limit; 429 when none is left. Give it back with
     * `releaseAuthAttempt` if the attempt succeeds.
     */
    async reserveAuthAttempt(ip: string): Promise<void> {
      try {
        await authFailures.consume(ip, 1);
      } catch (err) {
        if (!(err instanceof RateLimiterRes)) throw err;
        // The refused attempt is answered 429 without a look-up: it costs nothing.
        authFailures.reward(ip, 1).catch(() => {});
        throw tooManyFailures(err);
      }
    },

    releaseAuthAttempt(ip: string): void {
      authFailures.reward(ip, 1).catch(() => {});
    },

    async consumeBurst(lookup: KeyLookup): Promise<void> {
      const { burst, capacity } = planOf(lookup);
      let refused: BurstRefusal | null;
      try {
        refused = await burstAllowance.take(lookup.projectId, { rate: burst, capacity });
      } catch (err) {
        redisFailure(err);
      }
      if (refused) {
        const res = new RateLimiterRes(0, refused.msToNext, burst);
        throw new HttpError("rate_limited", `burst limit of ${burst} reports per second exceeded`, {
          body: limitBody(burst, res),
          headers: limitHeaders(burst, res),
        });
      }
    },

    /** Counts one report against the monthly quota; returns how to give it back. */
    async consumeQuota(lookup: KeyLookup): Promise<() => Promise<void>> {
      const { monthly } = planOf(lookup);
      if (monthly === null) return async () => {};
      const now = new Date();
      const month = now.toISOString().slice(0, 7);
      let taken: Awaited<ReturnType<typeof quota.take>>;
      try {
        taken = await quota.take(`${lookup.projectId}:${month}`, monthly, secondsToMonthEnd(now));
      } catch (err) {
        redisFailure(err);
      }
      if ("refund" in taken) return taken.refund;
      throw quotaExceeded(monthly, taken.used, now);
    },

    /** Gives back the quota this edge holds unused: after intake stopped, before Redis closes. */
    close(): Promise<void> {
      return quota.close();
    },
  };
}

export type Limits = ReturnType<typeof createLimits>;
