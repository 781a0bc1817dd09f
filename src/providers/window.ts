// What a provider said about one of its limits, as Headroom understands it: a window. A report
// carries any number of them (Anthropic's input and output tokens, Groq's requests per day beside
// tokens per minute, Mistral's month), derived on the server from the headers and error body the
// provider sent, or from the contract's six `limits` fields when a client sent only those.

/** Window lengths a provider states. `null` on a window: the provider did not say. */
export const WINDOW_LENGTHS = ["1s", "10s", "1m", "1h", "5h", "1d", "7d", "1mo"] as const;
export type WindowLength = (typeof WINDOW_LENGTHS)[number];

/** Dimensions Headroom names; a provider's own (lowercase snake case) may appear beside them. */
export const KNOWN_DIMENSIONS = [
  "requests",
  "tokens",
  "input_tokens",
  "output_tokens",
  "credits",
] as const;

/** A dimension's name as Headroom writes it (read-headers.ts's dimensionName): lowercase snake case. */
export const DIMENSION_NAME = /^[a-z0-9]+(?:_[a-z0-9]+)*$/;

/**
 * Windows one report may carry, and one series keeps (src/headroom/hot-series.ts, /usage's
 * points): the providers' lengths (8) times a few dimensions is well under it. Dimension names
 * are the provider's, hence the tenant's to choose: past it, windows are dropped with a warning,
 * the contract's own dimensions (KNOWN_DIMENSIONS) kept first.
 */
export const MAX_WINDOWS = 16;
export const MAX_DIMENSION_LENGTH = 64;

/**
 * Where a window's figures come from (docs/providers.md): `stated` by the provider (headers or
 * body), `learned` from a limit error's body that states the quota, `declared` by the project,
 * or `counted` from the reports against a learned or declared limit (a floor of what was used:
 * calls that no app reported are not seen).
 */
export const WINDOW_SOURCES = ["stated", "learned", "declared", "counted"] as const;
export type WindowFiguresSource = (typeof WINDOW_SOURCES)[number];

export interface Window {
  /** requests, tokens, input_tokens, output_tokens, credits, or what the provider names. */
  dimension: string;
  /** The window's length when the provider states it, else null (unknown). */
  window: WindowLength | null;
  limit: number | null;
  remaining: number | null;
  /** When the window resets, Unix ms (absolute), or null when unknown. */
  resets_at: number | null;
  /** Where its figures come from; absent: `stated` (what a parser reads is, unless it learns). */
  source?: WindowFiguresSource;
}

export interface WindowWarning {
  path: string;
  message: string;
}

export interface DerivedWindows {
  windows: Window[];
  /** Values that could not be read (kept as null, never a refused report). */
  warnings: WindowWarning[];
  /** The parser and its version that made these windows, e.g. "anthropic@1". */
  parser: string;
}

/** What a parser reads: one report's provider, figures and what the provider sent. */
export interface WindowSource {
  provider: string;
  /** When the provider answered (the report's timestamp), Unix ms: relative resets count from it. */
  at: number;
  /** The contract's six limits fields (null where absent). */
  limits: {
    requests_limit: number | null;
    requests_remaining: number | null;
    tokens_limit: number | null;
    tokens_remaining: number | null;
    reset_requests_ms: number | null;
    reset_tokens_ms: number | null;
  };
  credits: { credits_limit: number | null; credits_remaining: number | null } | null;
  /** Kept rate-limit headers, lowercase names, or null when the report carried none. */
  headers: Readonly<Record<string, string>> | null;
  /** The provider's JSON error body, or null. */
  error: unknown;
}
