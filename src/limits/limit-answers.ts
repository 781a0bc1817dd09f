// What a 429 says of a limit, in its body and its headers (RateLimit-* and Retry-After), the
// same for every limit of the edge and the read API.

/** What a 429 tells of a limit: what is left of it, and when more is due. */
export interface LimitState {
  remaining: number;
  msToReset: number;
}

export function limitHeaders(limit: number, state: LimitState) {
  const resetS = Math.max(1, Math.ceil(state.msToReset / 1000));
  return {
    "retry-after": resetS,
    "ratelimit-limit": limit,
    "ratelimit-remaining": Math.max(0, state.remaining),
    "ratelimit-reset": resetS,
  };
}

export function limitBody(limit: number, state: LimitState) {
  return {
    limit,
    remaining: Math.max(0, state.remaining),
    reset_at: new Date(Date.now() + state.msToReset).toISOString(),
  };
}
