import { BURST_CAPACITY_FACTOR, DEFAULT_PLANS, type Plan } from "../config.js";
import { HttpError, unavailable } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";
import { createAuthFailureLimits, LIMITS_PREFIX } from "../limits/auth-failures.js";
import {
  type BurstGrant,
  type BurstLimit,
  createBurstAllowance,
} from "../limits/burst-allowance.js";
import { limitBody, limitHeaders } from "../limits/limit-answers.js";
import { redisTokenBucket } from "../limits/token-bucket.js";
import type { RedisClient } from "../redis/connections.js";
import {
  createQuotaAllowance,
  type QuotaAllowanceOptions,
  type QuotaElsewhere,
} from "./quota-allowance.js";
import { redisQuotaStore } from "./quota-counter.js";

// Per-project burst limit (reports per second) and plan quota (reports per calendar month, UTC),
// both in Redis so that every edge shares them, each reserved in chunks per edge so that a report
// rarely waits for Redis (limits/burst-allowance.ts, quota-allowance.ts); failed authentication limited
// per client IP (limits/auth-failures.ts).
//
// A limit that is hit is a 429; Redis failing is a 503, because an edge that cannot reach Redis
// cannot enqueue the report either.

export interface LimitsOptions {
  redis: RedisClient;
  plans: Record<string, Plan>;
  prefix?: string;
  authFailuresPerIp: number;
  authFailureWindowS: number;
  /** Clients whose failures are tracked at once (see limits/failed-auth-limiter.ts). */
  authFailureMaxClients?: number;
  /**
   * Count failed authentications with every process of this deployment (its queue prefix), on
   * a connection of their own (limits/auth-failures.ts); absent: this process only.
   */
  shareAuthFailures?: { deployment: string };
  /** Share of a project's burst an edge reserves from Redis at once (see limits/burst-allowance.ts). */
  burstShare?: number;
  /** How the monthly quota is reserved (see quota-allowance.ts). */
  quota?: Omit<QuotaAllowanceOptions, "store">;
}

/** A key's plan with its overrides applied, and the size of its burst bucket. */
export type EffectivePlan = Plan & { capacity: number };

export function effectivePlan(plans: Record<string, Plan>, lookup: KeyLookup): EffectivePlan {
  // A plan removed from the configuration falls back to the most restrictive default.
  // Own keys only: `constructor` or `__proto__` names no plan.
  const own = (name: string) => (Object.hasOwn(plans, name) ? plans[name] : undefined);
  const base = own(lookup.plan) ?? own("free") ?? DEFAULT_PLANS.free;
  const plan = { ...base, ...lookup.overrides };
  // A project whose rate is overridden gets a bucket to match, unless its size is set too.
  const capacity =
    lookup.overrides.capacity ??
    (lookup.overrides.burst === undefined ? base.capacity : undefined) ??
    plan.burst * BURST_CAPACITY_FACTOR;
  return { ...plan, capacity: Math.max(capacity, plan.burst) };
}

/** The month (`YYYY-MM`, UTC) of an instant. */
export const monthOf = (ms: number): string => new Date(ms).toISOString().slice(0, 7);

/** The first instant after `month` (`YYYY-MM`): when its quota resets. */
export function nextMonthStart(month: string): number {
  return Date.UTC(Number(month.slice(0, 4)), Number(month.slice(5, 7)), 1);
}

/** The 429 once the month's quota is used up: `used` is the month's counter. */
function quotaExceeded(monthly: number, used: number, month: string, now: number): HttpError {
  const reset = nextMonthStart(month);
  const state = { remaining: 0, msToReset: reset - now };
  return new HttpError("quota_exceeded", `monthly quota of ${monthly} reports used up`, {
    body: {
      limit: monthly,
      remaining: 0,
      reset_at: new Date(reset).toISOString(),
      used: Math.min(monthly, used),
    },
    headers: limitHeaders(monthly, state),
  });
}

function burstExceeded(burst: number, msToNext: number): HttpError {
  const state = { remaining: 0, msToReset: msToNext };
  return new HttpError("rate_limited", `burst limit of ${burst} reports per second exceeded`, {
    body: limitBody(burst, state),
    headers: limitHeaders(burst, state),
  });
}

/** Gives a report's unit of the quota back. */
export type Refund = () => Promise<void>;
const noRefund: Refund = async () => {};

/** Up to `n` reports let through a limit: how many, and the 429 the others get (or null). */
export interface Grant {
  granted: number;
  refusal: HttpError | null;
}

/** Grant of the monthly quota, with how to give units back. */
export interface QuotaGrant extends Grant {
  refund: (units: number) => Promise<void>;
}

export interface Limits {
  checkAuthFailures: (ip: string) => void | Promise<void>;
  recordAuthFailure: (ip: string) => void;
  reserveAuthAttempt: (ip: string, lookUp: boolean) => void | Promise<void>;
  releaseAuthAttempt: (ip: string) => void;
  refuseClient: (ip: string) => void;
  authFailureClients: () => number;
  /**
   * One report's worth of the burst limit: null when a token in hand passes it at once,
   * otherwise a promise that settles (or rejects with the 429) once the bucket answered.
   */
  consumeBurst(lookup: KeyLookup): Promise<void> | null;
  /**
   * Up to `n` reports' worth of the burst limit: `granted` of them, and the 429 the others
   * get when fewer were granted.
   */
  consumeBurstMany(lookup: KeyLookup, n: number): Promise<Grant>;
  /**
   * Up to `n` reports' worth of the monthly quota (see consumeQuota): `granted` of them, how
   * to give units back, and the 429 the others get when fewer were granted.
   */
  consumeQuotaMany(lookup: KeyLookup, n: number): Promise<QuotaGrant>;
  /**
   * Counts one report against the monthly quota of the month Redis's clock is in; returns how
   * to give it back (at once for a plan without a quota).
   */
  consumeQuota(lookup: KeyLookup): Refund | Promise<Refund>;
  /** Gives back the quota this edge holds unused: after intake stopped, before Redis closes. */
  close(): Promise<void>;
}

export function createLimits(opts: LimitsOptions): Limits {
  const prefix = opts.prefix ?? LIMITS_PREFIX;
  /** The month Redis last named, and this edge's month when it did. */
  let redisMonth: { own: string; redis: string } | null = null;
  // Both limits need a request's plan; the key cache hands out one look-up object per key for
  // its lifetime, so the plan is worked out once per look-up, not twice per request.
  const plans = new WeakMap<KeyLookup, EffectivePlan & { bucket: BurstLimit }>();
  const planOf = (lookup: KeyLookup) => {
    let plan = plans.get(lookup);
    if (!plan) {
      const effective = effectivePlan(opts.plans, lookup);
      plan = { ...effective, bucket: { rate: effective.burst, capacity: effective.capacity } };
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

  const authFailures = createAuthFailureLimits({
    points: opts.authFailuresPerIp,
    windowS: opts.authFailureWindowS,
    maxClients: opts.authFailureMaxClients,
    shared: opts.shareAuthFailures && { redis: opts.redis, ...opts.shareAuthFailures },
  });

  /**
   * Asks the quota of the month Redis's clock is in: this edge's month, unless Redis last named
   * another one while this edge's clock was still in it (a few seconds around the turn of a
   * month); that month when Redis answers with it.
   */
  async function inRedisMonth<T extends object>(
    lookup: KeyLookup,
    t: number,
    ask: (key: string) => Promise<T | QuotaElsewhere>,
  ): Promise<{ taken: T; month: string }> {
    const own = monthOf(t);
    let month = redisMonth?.own === own ? redisMonth.redis : own;
    for (let asked = 0; asked < 2; asked++) {
      let taken: T | QuotaElsewhere;
      try {
        taken = await ask(`${lookup.projectId}:${month}`);
      } catch {
        // Redis failed: the report could not be enqueued either.
        throw unavailable();
      }
      if (!("month" in taken)) return { taken, month };
      redisMonth = { own, redis: taken.month };
      month = taken.month;
    }
    // Redis's month changed between two calls: the turn of the month, this very instant.
    throw unavailable();
  }

  async function takeQuota(lookup: KeyLookup, monthly: number): Promise<Refund> {
    const t = Date.now();
    const { taken, month } = await inRedisMonth(lookup, t, (key) => quota.take(key, monthly));
    if ("used" in taken) throw quotaExceeded(monthly, taken.used, month, t);
    return taken.refund;
  }

  return {
    // Failed authentications per client (limits/auth-failures.ts).
    checkAuthFailures: authFailures.checkAuthFailures,
    recordAuthFailure: authFailures.recordAuthFailure,
    reserveAuthAttempt: authFailures.reserveAuthAttempt,
    releaseAuthAttempt: authFailures.releaseAuthAttempt,
    refuseClient: authFailures.refuseClient,
    authFailureClients: authFailures.clients,

    consumeBurst(lookup: KeyLookup): Promise<void> | null {
      const { burst, bucket } = planOf(lookup);
      if (burstAllowance.takeInHand(lookup.projectId, bucket)) return null;
      return burstAllowance.take(lookup.projectId, bucket).then(
        (refused) => {
          if (refused) throw burstExceeded(burst, refused.msToNext);
        },
        () => {
          // Redis failed: the report could not be enqueued either.
          throw unavailable();
        },
      );
    },

    async consumeBurstMany(lookup: KeyLookup, n: number): Promise<Grant> {
      const { burst, bucket } = planOf(lookup);
      let got: BurstGrant;
      try {
        got = await burstAllowance.takeMany(lookup.projectId, bucket, n);
      } catch {
        throw unavailable();
      }
      return {
        granted: got.granted,
        refusal: got.granted < n ? burstExceeded(burst, got.msToNext) : null,
      };
    },

    async consumeQuotaMany(lookup: KeyLookup, n: number): Promise<QuotaGrant> {
      const { monthly } = planOf(lookup);
      if (monthly === null) return { granted: n, refund: async () => {}, refusal: null };
      const t = Date.now();
      const { taken, month } = await inRedisMonth(lookup, t, (key) =>
        quota.takeMany(key, monthly, n),
      );
      const refusal = taken.granted < n ? quotaExceeded(monthly, taken.used, month, t) : null;
      return { granted: taken.granted, refund: taken.refund, refusal };
    },

    consumeQuota(lookup: KeyLookup): Refund | Promise<Refund> {
      const { monthly } = planOf(lookup);
      if (monthly === null) return noRefund;
      return takeQuota(lookup, monthly);
    },

    async close(): Promise<void> {
      await quota.close();
      await authFailures.close();
    },
  };
}
