// Only rate-limit and quota headers are kept from what a client forwards: every other header
// (cookies, organisation ids, request ids, authorization) is dropped at the edge before the report
// is queued, and is never stored or logged. Names are matched case-insensitively and kept
// lowercase. What is kept is bounded; a report past a bound is the edge's to refuse (it gets
// `violation`), and `kept` stays within the bounds either way.

/** At most this many headers are kept. */
export const MAX_KEPT_HEADERS = 64;
/** A kept header's name is at most this long. */
export const MAX_HEADER_NAME_LENGTH = 128;
/** A kept header's value is at most this long. */
export const MAX_HEADER_VALUE_LENGTH = 512;

export interface HeaderViolation {
  reason: "too_many" | "name_too_long" | "value_too_long" | "value_not_string";
  /** The (lowercase, shortened) header name at fault, or null for too_many. */
  name: string | null;
}

export interface KeptHeaders {
  /** Lowercase name → value, only allowlisted names. */
  kept: Record<string, string>;
  /** How many headers were dropped. */
  dropped: number;
  /** The first bound an allowlisted header broke, or null: the edge refuses such a report. */
  violation?: HeaderViolation | null;
}

/** Families of names, by prefix: each provider's, and the generic x-ratelimit-*. */
const PREFIXES = [
  "x-ratelimit-", // OpenAI, Azure OpenAI, Groq, Cerebras, Fireworks, Mistral, Together, OpenRouter, generic
  "anthropic-ratelimit-", // Anthropic, with the unified (subscription) windows
  "anthropic-priority-input-tokens-", // Anthropic Priority Tier
  "anthropic-priority-output-tokens-",
  "x-ratelimitbysize-", // Mistral (older)
  "ratelimitbysize-", // Mistral (older)
  "x-tokenlimit-", // Together
];

/** Single names: the IETF fields and retry hints. */
const NAMES = new Set([
  "ratelimit",
  "ratelimit-policy",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "retry-after",
  "retry-after-ms", // Azure OpenAI
  "x-ms-retry-after-ms", // Azure OpenAI
]);

/** Whether `name` (any case) is a rate-limit or quota header that Headroom keeps. */
export function isRateLimitHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return NAMES.has(lower) || PREFIXES.some((p) => lower.startsWith(p) && lower.length > p.length);
}

const shortName = (name: string) => name.slice(0, 64);

/** The allowlisted headers of `headers` (names case-insensitive, values strings). */
export function keepRateLimitHeaders(headers: Readonly<Record<string, unknown>>): KeptHeaders {
  const kept: Record<string, string> = {};
  let count = 0;
  let dropped = 0;
  let violation: HeaderViolation | null = null;
  const refuse = (v: HeaderViolation) => {
    violation ??= v;
    dropped++;
  };
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!isRateLimitHeader(lower)) dropped++;
    else if (lower.length > MAX_HEADER_NAME_LENGTH)
      refuse({ reason: "name_too_long", name: shortName(lower) });
    else if (typeof value !== "string") refuse({ reason: "value_not_string", name: lower });
    else if (value.length > MAX_HEADER_VALUE_LENGTH)
      refuse({ reason: "value_too_long", name: lower });
    else if (Object.hasOwn(kept, lower)) dropped++;
    else if (count >= MAX_KEPT_HEADERS) refuse({ reason: "too_many", name: null });
    else {
      kept[lower] = value;
      count++;
    }
  }
  return { kept, dropped, violation };
}
