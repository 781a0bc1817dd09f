import type { DerivedWindows, Window, WindowSource } from "./window.js";

// A report's windows, derived on the server. STUB: only the contract's six limits fields and
// credits are read (the legacy parser); issue 34's per-provider parsers replace the body of
// deriveWindows and keep its signature.

export function deriveWindows(source: WindowSource): DerivedWindows {
  const { limits, credits, at } = source;
  const windows: Window[] = [];
  const resetAt = (ms: number | null) => (ms === null ? null : at + ms);
  if (limits.requests_limit !== null || limits.requests_remaining !== null)
    windows.push({
      dimension: "requests",
      window: null,
      limit: limits.requests_limit,
      remaining: limits.requests_remaining,
      resets_at: resetAt(limits.reset_requests_ms),
    });
  if (limits.tokens_limit !== null || limits.tokens_remaining !== null)
    windows.push({
      dimension: "tokens",
      window: null,
      limit: limits.tokens_limit,
      remaining: limits.tokens_remaining,
      resets_at: resetAt(limits.reset_tokens_ms),
    });
  if (credits && (credits.credits_limit !== null || credits.credits_remaining !== null))
    windows.push({
      dimension: "credits",
      window: null,
      limit: credits.credits_limit,
      remaining: credits.credits_remaining,
      resets_at: null,
    });
  return { windows, warnings: [], parser: "limits@1" };
}

/** The fields of a stored report that windows are derived from (a ReportRecord has them). */
export interface WindowRecord {
  provider: string;
  /** ISO 8601, the provider's answer time as the client reported it. */
  timestamp: string;
  requests_limit: number | null;
  requests_remaining: number | null;
  tokens_limit: number | null;
  tokens_remaining: number | null;
  reset_requests_ms: number | null;
  reset_tokens_ms: number | null;
  credits_limit: number | null;
  credits_remaining: number | null;
  /** Kept headers as compact JSON text, or null/absent. */
  headers?: string | null;
  /** The provider's error body as compact JSON text, or null/absent. */
  error?: string | null;
}

const parseJson = (text: string | null | undefined): unknown => {
  if (text == null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

/** deriveWindows for a stored report. */
export function windowsOfRecord(record: WindowRecord): DerivedWindows {
  const headers = parseJson(record.headers);
  return deriveWindows({
    provider: record.provider,
    at: Date.parse(record.timestamp),
    limits: {
      requests_limit: record.requests_limit,
      requests_remaining: record.requests_remaining,
      tokens_limit: record.tokens_limit,
      tokens_remaining: record.tokens_remaining,
      reset_requests_ms: record.reset_requests_ms,
      reset_tokens_ms: record.reset_tokens_ms,
    },
    credits:
      record.credits_limit === null && record.credits_remaining === null
        ? null
        : { credits_limit: record.credits_limit, credits_remaining: record.credits_remaining },
    headers:
      headers !== null && typeof headers === "object" ? (headers as Record<string, string>) : null,
    error: parseJson(record.error),
  });
}
