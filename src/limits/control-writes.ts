import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { HttpError } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { RedisClient } from "../redis/connections.js";
import { LIMITS_PREFIX } from "./auth-failures.js";
import { limitBody, limitHeaders } from "./limit-answers.js";

// The control plane's writes (POST, PUT, DELETE) per minute, counted across every process of the
// deployment (rate-limiter-flexible, in Redis): per management key, and per project for its
// manage keys together, so that a tenant with many keys is held to its project's rate. An admin
// key counts against its own limit only: a tenant's flood never shuts the operator out of the
// tenant's project. The CLI, which holds Redis itself, is not counted. Counting needs Redis, as
// the writes do: when it is away, the write fails as it would anyway.

export interface ControlWriteOptions {
  perKeyPerMin: number;
  perProjectPerMin: number;
  /** The queue prefix: two deployments on one Redis count apart. */
  deployment: string;
}

export interface ControlWriteLimits {
  /** Counts one write of this key; a 429 (rate_limited, Retry-After) past either limit. */
  take(key: KeyLookup): Promise<void>;
}

const WINDOW_S = 60;

export function createControlWriteLimits(
  redis: RedisClient,
  opts: ControlWriteOptions,
): ControlWriteLimits {
  const base = `${LIMITS_PREFIX}:control-writes:${opts.deployment.replace(/[{}]/g, "")}`;
  const perKey = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${base}:key`,
    points: opts.perKeyPerMin,
    duration: WINDOW_S,
  });
  const perProject = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${base}:project`,
    points: opts.perProjectPerMin,
    duration: WINDOW_S,
  });

  const tooMany = (what: string, limit: number, res: RateLimiterRes) => {
    const state = { remaining: res.remainingPoints, msToReset: res.msBeforeNext };
    return new HttpError(
      "rate_limited",
      `${what} made ${limit} control plane writes this minute; retry after the Retry-After seconds`,
      { body: limitBody(limit, state), headers: limitHeaders(limit, state) },
    );
  };

  /** A refusal as a 429; anything else (Redis failed) as it is. */
  const refused = (err: unknown, what: string, limit: number) =>
    err instanceof RateLimiterRes ? tooMany(what, limit, err) : err;

  return {
    async take(key: KeyLookup): Promise<void> {
      await perKey.consume(key.keyId, 1).catch((err: unknown) => {
        throw refused(err, "this key", opts.perKeyPerMin);
      });
      if (key.scope === "admin") return;
      await perProject.consume(key.projectId, 1).catch(async (err: unknown) => {
        // The key's own count gives back what the project refused.
        await perKey.reward(key.keyId, 1).catch(() => undefined);
        throw refused(err, `project ${key.projectId}`, opts.perProjectPerMin);
      });
    },
  };
}
