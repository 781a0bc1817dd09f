import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { AuthFailureLimits } from "../http/authenticate.js";
import { HttpError } from "../http/errors.js";
import type { RedisClient } from "../redis/connections.js";
import { clientOf, createFailedAuthLimiter, type FailureWindow } from "./failed-auth-limiter.js";
import { limitBody, limitHeaders } from "./limit-answers.js";

// Failed authentications per client, counted twice: in this process (no Redis call to refuse a
// client that keeps failing here, and the limit that holds while Redis is away) and, with a Redis
// to share, across every edge and read API process (rate-limiter-flexible's RateLimiterRedis), so
// that guesses spread over N processes get the limit once, not N times. The shared count is
// asked only when an attempt needs a key look-up; a cached good key never asks.

/** Where the limits keep their keys in Redis: the edges and the read API count together. */
export const LIMITS_PREFIX = "headroom";

export interface AuthFailureOptions {
  points: number;
  windowS: number;
  /** Clients whose failures this process holds at once (see failed-auth-limiter.ts). */
  maxClients?: number;
  /** Where every process's failures are counted together; absent: this process only. */
  shared?: { redis: RedisClient; prefix: string };
}

export function createAuthFailureLimits(opts: AuthFailureOptions) {
  const local = createFailedAuthLimiter({
    points: opts.points,
    windowMs: opts.windowS * 1000,
    maxClients: opts.maxClients ?? 100_000,
  });
  const shared = opts.shared
    ? new RateLimiterRedis({
        storeClient: opts.shared.redis,
        keyPrefix: `${opts.shared.prefix}:auth-failures`,
        points: opts.points,
        duration: opts.windowS,
        // A Redis that is away refuses at once; this process's own count stands meanwhile.
        rejectIfRedisNotReady: true,
      })
    : null;

  const tooMany = (state: FailureWindow) =>
    new HttpError("rate_limited", "too many failed authentication attempts", {
      body: limitBody(opts.points, state),
      headers: limitHeaders(opts.points, state),
    });
  const ignore = () => {};

  const limits: AuthFailureLimits & { clients(): number } = {
    checkAuthFailures(ip: string): void {
      const res = local.get(ip);
      if (res && res.remaining <= 0) throw tooMany(res);
    },

    /** A failure found by a look-up that another attempt made (authenticate.ts shares them). */
    recordAuthFailure(ip: string): void {
      local.add(ip);
      shared?.penalty(clientOf(ip), 1).catch(ignore);
    },

    reserveAuthAttempt(ip: string, lookUp: boolean): void | Promise<void> {
      // A refused attempt is answered 429 without a look-up, and takes nothing.
      const refused = local.take(ip);
      if (refused) throw tooMany(refused);
      // Only guesses that reach the key store are worth sharing: a malformed key, or one known
      // to be bad, learns nothing, and is refused at no cost to Redis.
      if (!shared || !lookUp) return;
      return shared.consume(clientOf(ip), 1).then(
        () => undefined,
        (err: unknown) => {
          // An Error is Redis failing: this process's count already holds the attempt.
          if (!(err instanceof RateLimiterRes)) return;
          // Spent everywhere: this process refuses the client itself from now on.
          local.add(ip, opts.points);
          throw tooMany({ remaining: 0, msToReset: err.msBeforeNext });
        },
      );
    },

    releaseAuthAttempt(ip: string): void {
      local.give(ip);
      shared?.reward(clientOf(ip), 1).catch(ignore);
    },

    /** Clients whose failed authentications this process holds now. */
    clients: () => local.size,
  };
  return limits;
}

export type AuthFailures = ReturnType<typeof createAuthFailureLimits>;
