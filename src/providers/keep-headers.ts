// The allowlist of rate-limit and quota headers: only these are kept from what a client forwards.
// Every other header (cookies, organisation ids, request ids, authorization) is dropped at the
// edge before the report is queued, and is never stored or logged. Names are matched
// case-insensitively and kept lowercase. What is kept is bounded where it is read, in
// report/provider-said.ts (readProviderSaid): a header over a bound is dropped with a warning,
// never a refused report.

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
