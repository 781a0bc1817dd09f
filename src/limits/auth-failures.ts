import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { AuthFailureLimits } from "../http/authenticate.js";
import { HttpError } from "../http/errors.js";
import { closeRedis, duplicateWith, type RedisClient } from "../redis/connections.js";
import { clientOf, createFailedAuthLimiter, type FailureWindow } from "./failed-auth-limiter.js";
import { limitBody, limitHeaders } from "./limit-answers.js";

// Failed authentications per client, counted twice: in this process (a client that keeps failing
// here is refused without a Redis call) and, given a Redis, across every edge and read API of the
// deployment (rate-limiter-flexible), so that guesses spread over N processes get the limit once.
// The shared count has a connection of its own whose commands time out quickly and are never
// queued: a Redis that is away or silently dead costs an attempt at most SHARED_TIMEOUT_MS, and
// the in-memory insurance limiter (this process's count) decides meanwhile.

/** Where the edge's limits keep their keys in Redis. */
export const LIMITS_PREFIX = "headroom";

/** The longest the shared count is waited for; past it, this process's count decides. */
export const SHARED_TIMEOUT_MS = 500;

export interface AuthFailureOptions {
  points: number;
  windowS: number;
  /** Clients whose failures this process holds at once (see failed-auth-limiter.ts). */
  maxClients?: number;
  /**
   * Where every process of the deployment counts together: a connection like `redis` is opened
   * for it. `deployment` (the queue prefix) keeps two deployments on one Redis apart.
   */
  shared?: { redis: RedisClient; deployment: string };
}

export interface AuthFailures extends AuthFailureLimits {
  /** Clients whose failed authentications this process holds now. */
  clients(): number;
  /** Closes the shared count's connection. */
  close(): Promise<void>;
}

const ignore = () => {};

/** The shared count, on its own connection, replaced when a command on it went unanswered. */
function sharedCount(
  opts: AuthFailureOptions & { shared: NonNullable<AuthFailureOptions["shared"]> },
) {
  const redis = duplicateWith(opts.shared.redis, {
    commandTimeout: SHARED_TIMEOUT_MS,
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
  });
  // The deployment's other connections report Redis's errors; this one falls back quietly.
  redis.on("error", ignore);
  // Asked only when Redis failed. Failing on a connection that says it is ready means a command
  // timed out: the connection may be the silently dead kind, and a new one is opened.
  const renew = () => {
    if (redis.status === "ready") redis.disconnect(true);
  };
  class Insurance extends RateLimiterMemory {
    override consume(...args: Parameters<RateLimiterMemory["consume"]>) {
      renew();
      return super.consume(...args);
    }
    override penalty(...args: Parameters<RateLimiterMemory["penalty"]>) {
      renew();
      return super.penalty(...args);
    }
    override reward(...args: Parameters<RateLimiterMemory["reward"]>) {
      renew();
      return super.reward(...args);
    }
  }
  const duration = opts.windowS;
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    // No hash tag: clients spread over a Cluster's slots.
    keyPrefix: `${LIMITS_PREFIX}:auth-failures:${opts.shared.deployment.replace(/[{}]/g, "")}`,
    points: opts.points,
    duration,
    rejectIfRedisNotReady: true,
    insuranceLimiter: new Insurance({ points: opts.points, duration }),
  });
  return { limiter, close: () => closeRedis(redis) };
}

export function createAuthFailureLimits(opts: AuthFailureOptions): AuthFailures {
  const local = createFailedAuthLimiter({
    points: opts.points,
    windowMs: opts.windowS * 1000,
    maxClients: opts.maxClients ?? 100_000,
  });
  const shared = opts.shared ? sharedCount({ ...opts, shared: opts.shared }) : null;
  const tooMany = (state: FailureWindow) =>
    new HttpError("rate_limited", "too many failed authentication attempts", {
      body: limitBody(opts.points, state),
      headers: limitHeaders(opts.points, state),
    });

  return {
    checkAuthFailures(ip: string): void {
      const res = local.get(ip);
      if (res && res.remaining <= 0) throw tooMany(res);
    },

    /** A failure found by a look-up that another attempt made (authenticate.ts shares them). */
    recordAuthFailure(ip: string): void {
      local.add(ip);
      shared?.limiter.penalty(clientOf(ip), 1).catch(ignore);
    },

    reserveAuthAttempt(ip: string, lookUp = false): void | Promise<void> {
      // A refused attempt is answered 429 without a look-up, and takes nothing.
      const refused = local.take(ip);
      if (refused) throw tooMany(refused);
      // Only guesses that reach the key store are worth sharing: a malformed key, or one known
      // to be bad, learns nothing, and is refused at no cost to Redis.
      if (!shared || !lookUp) return;
      return shared.limiter.consume(clientOf(ip), 1).then(
        () => undefined,
        (err: unknown) => {
          // Not a refusal: the insurance limiter failed too, and this process's count holds.
          if (!(err instanceof RateLimiterRes)) return;
          // Spent across the deployment, good look-ups in flight included: whether the client is
          // refused from now on is decided once its key is known (refuseClient).
          throw tooMany({ remaining: 0, msToReset: err.msBeforeNext });
        },
      );
    },

    refuseClient(ip: string): void {
      local.add(ip, opts.points);
    },

    releaseAuthAttempt(ip: string): void {
      local.give(ip);
      shared?.limiter.reward(clientOf(ip), 1).catch(ignore);
    },

    clients: () => local.size,

    close: async () => {
      await shared?.close();
    },
  };
}
