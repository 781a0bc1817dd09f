import type { AuthFailureLimits } from "../http/authenticate.js";
import { HttpError } from "../http/errors.js";
import { createFailedAuthLimiter, type FailureWindow } from "./failed-auth-limiter.js";
import { limitBody, limitHeaders } from "./limit-answers.js";

// Failed authentications per client, counted in this process, so that refusing a client that
// keeps failing costs no Redis call. (Counting them across processes in Redis is not done yet: a
// shared count made the edge's look-ups wait behind it on a dead connection.)

/** Where the edge's limits keep their keys in Redis. */
export const LIMITS_PREFIX = "headroom";

export interface AuthFailureOptions {
  points: number;
  windowS: number;
  /** Clients whose failures this process holds at once (see failed-auth-limiter.ts). */
  maxClients?: number;
}

export function createAuthFailureLimits(opts: AuthFailureOptions) {
  const local = createFailedAuthLimiter({
    points: opts.points,
    windowMs: opts.windowS * 1000,
    maxClients: opts.maxClients ?? 100_000,
  });
  const tooMany = (state: FailureWindow) =>
    new HttpError("rate_limited", "too many failed authentication attempts", {
      body: limitBody(opts.points, state),
      headers: limitHeaders(opts.points, state),
    });

  const limits: AuthFailureLimits & { clients(): number } = {
    checkAuthFailures(ip: string): void {
      const res = local.get(ip);
      if (res && res.remaining <= 0) throw tooMany(res);
    },

    /** A failure found by a look-up that another attempt made (authenticate.ts shares them). */
    recordAuthFailure(ip: string): void {
      local.add(ip);
    },

    reserveAuthAttempt(ip: string): void {
      // A refused attempt is answered 429 without a look-up, and takes nothing.
      const refused = local.take(ip);
      if (refused) throw tooMany(refused);
    },

    releaseAuthAttempt(ip: string): void {
      local.give(ip);
    },

    /** Clients whose failed authentications this process holds now. */
    clients: () => local.size,
  };
  return limits;
}

export type AuthFailures = ReturnType<typeof createAuthFailureLimits>;
