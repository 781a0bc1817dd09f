import { limitBody, limitHeaders } from "../edge/limits.js";
import type { TakeTokens } from "../edge/token-bucket.js";
import { HttpError, unavailable } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";

// Read requests per key: the edge's token bucket in Redis (shared by every read API process),
// one token per request, answered like the report endpoint's 429 when it is empty.

export interface ReadLimitOptions {
  take: TakeTokens;
  ratePerS: number;
  burst: number;
}

export type ReadLimit = (lookup: KeyLookup) => Promise<void>;

export function createReadLimit({ take, ratePerS, burst }: ReadLimitOptions): ReadLimit {
  const capacity = Math.max(burst, 1);
  return async (lookup) => {
    let got: Awaited<ReturnType<TakeTokens>>;
    try {
      got = await take(lookup.keyId, ratePerS, capacity, 1, 0);
    } catch {
      throw unavailable("the service cannot check limits right now");
    }
    if (got.granted > 0) return;
    const state = { remaining: 0, msToReset: Math.max(1, got.msToNext) };
    throw new HttpError("rate_limited", `read limit of ${ratePerS} requests per second exceeded`, {
      body: limitBody(ratePerS, state),
      headers: limitHeaders(ratePerS, state),
    });
  };
}
