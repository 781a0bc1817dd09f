// Only rate-limit and quota headers are kept from what a client forwards: every other header
// (cookies, organisation ids, request ids) is dropped at the edge before the report is queued,
// and is never stored or logged. STUB: the allowlist per provider is filled in by issue 34's parsers.

export interface KeptHeaders {
  /** Lowercase name → value, only allowlisted names. */
  kept: Record<string, string>;
  /** How many headers were dropped. */
  dropped: number;
}

const GENERIC = /^(x-ratelimit-|anthropic-ratelimit-|ratelimit$|ratelimit-policy$|retry-after$)/;

/** The allowlisted headers of `headers` (names case-insensitive, values strings). */
export function keepRateLimitHeaders(headers: Readonly<Record<string, string>>): KeptHeaders {
  const kept: Record<string, string> = {};
  let dropped = 0;
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (GENERIC.test(lower)) kept[lower] = value;
    else dropped++;
  }
  return { kept, dropped };
}
