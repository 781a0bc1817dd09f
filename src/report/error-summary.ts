// A stored report's error body (the provider's, as the client forwarded it: docs/report-api.md)
// in a line a person reads beside its windows: "429 rate limited (RESOURCE_EXHAUSTED)". The body
// is any JSON value, so only a few well-known places are read, and only bounded, plain tokens of
// it are repeated (a status between 100 and 599, a kind of at most 64 letters, digits and `_.:-`).

export interface ErrorSummary {
  /** "429 rate limited (RESOURCE_EXHAUSTED)", "rate limited (rate_limit_error)", "error". */
  summary: string;
  /** The HTTP status the body states, when it states one. */
  status: number | null;
  /** Whether the body says a rate limit or quota was hit. */
  rate_limited: boolean;
  /** The provider's own name for the error, when it gives a plain one. */
  kind: string | null;
}

const KIND = /^[A-Za-z0-9_.:-]{1,64}$/;
/** What providers call being limited: Gemini, Anthropic, OpenAI, Bedrock, Azure. */
const RATE_LIMITED = /rate.?limit|resource.?exhausted|throttl|too.?many.?requests|quota/i;

const record = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

function statusOf(v: unknown): number | null {
  const n = typeof v === "string" && /^\d{3}$/.test(v) ? Number(v) : v;
  return typeof n === "number" && Number.isInteger(n) && n >= 100 && n <= 599 ? n : null;
}

const kindOf = (v: unknown): string | null =>
  typeof v === "string" && KIND.test(v) && statusOf(v) === null && v !== "error" ? v : null;

/** The summary of an error body (a parsed JSON value), or null when there is none. */
export function summariseError(body: unknown): ErrorSummary | null {
  if (body === null || body === undefined) return null;
  const top = record(body);
  const inner = record(top?.error);
  const meta = record(top?.$metadata);
  // Gemini / Google: {error: {code: 429, status: "RESOURCE_EXHAUSTED"}}; OpenAI and Azure:
  // {error: {code: "rate_limit_exceeded" | "429", type}}; Anthropic: {type: "error", error:
  // {type: "rate_limit_error"}}; Bedrock (the SDK's exception): {name: "ThrottlingException",
  // $metadata: {httpStatusCode: 429}}; or a bare {status: 429}.
  const places = [
    inner?.code,
    inner?.status,
    top?.status,
    top?.code,
    top?.statusCode,
    meta?.httpStatusCode,
  ];
  const status = places.map(statusOf).find((s) => s !== null) ?? null;
  const kinds = [
    inner?.status,
    inner?.code,
    inner?.type,
    top?.name,
    top?.__type,
    top?.code,
    top?.type,
  ];
  const kind = kinds.map(kindOf).find((k) => k !== null) ?? null;
  const message = typeof inner?.message === "string" ? inner.message : top?.message;
  const rateLimited =
    status === 429 ||
    (kind !== null && RATE_LIMITED.test(kind)) ||
    (typeof message === "string" && RATE_LIMITED.test(message.slice(0, 500)));
  const head = [status, rateLimited ? "rate limited" : "error"].filter((x) => x !== null);
  return {
    summary: `${head.join(" ")}${kind === null ? "" : ` (${kind})`}`,
    status,
    rate_limited: rateLimited,
    kind,
  };
}
