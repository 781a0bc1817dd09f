import { HttpError, unavailable } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";
import { createBurstAllowance } from "../limits/burst-allowance.js";
import { limitBody, limitHeaders } from "../limits/limit-answers.js";
import type { TakeTokens } from "../limits/token-bucket.js";

// Read requests per key: the edge's token bucket in Redis (shared by every read API process),
// one token per request, answered like the report endpoint's 429 when it is empty. Tokens are
// taken a few at a time, as the edge takes them (limits/burst-allowance.ts): a quarter of a second's
// rate (5 at the default 20/s), so a dashboard's polls do not each wait for Redis. A process
// holds them up to 5 s before they go back (the edge: 1 s), since a page polls every 2 s: held
// for 1 s they would go back before its next poll, and every poll would take again.

export interface ReadLimitOptions {
  take: TakeTokens;
  ratePerS: number;
  burst: number;
  now?: () => number;
}

/** Passes at once (undefined) with a token in hand; else a promise, rejected when refused. */
export type ReadLimit = (lookup: KeyLookup) => undefined | Promise<void>;

/** Tokens taken at once, as a share of the per-second rate (at least one). */
export const READ_TAKE_SHARE = 0.25;
/** How long tokens taken may be spent before they go back to the bucket. */
export const READ_HOLD_MS = 5_000;

export function createReadLimit({ take, ratePerS, burst, now }: ReadLimitOptions): ReadLimit {
  const limit = { rate: ratePerS, capacity: Math.max(burst, 1) };
  const allowance = createBurstAllowance({
    take,
    share: READ_TAKE_SHARE,
    holdMs: READ_HOLD_MS,
    now,
  });
  const takeOne = async (lookup: KeyLookup) => {
    let refusal: Awaited<ReturnType<typeof allowance.take>>;
    try {
      refusal = await allowance.take(lookup.keyId, limit);
    } catch {
      throw unavailable("the service cannot check limits right now");
    }
    if (!refusal) return;
    const state = { remaining: 0, msToReset: Math.max(1, refusal.msToNext) };
    throw new HttpError("rate_limited", `read limit of ${ratePerS} requests per second exceeded`, {
      body: limitBody(ratePerS, state),
      headers: limitHeaders(ratePerS, state),
    });
  };
  return (lookup) => (allowance.takeInHand(lookup.keyId, limit) ? undefined : takeOne(lookup));
}
