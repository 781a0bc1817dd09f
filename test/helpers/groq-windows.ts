import type { DerivedWindows, Window, WindowSource } from "../../src/providers/window.js";

// A stand-in for issue 34 part A's parsers, for the read side's tests until they land: a window
// set shaped like Groq's (requests per day beside tokens per minute), plus a second tokens window
// per day, read from the contract's six fields of a record:
//
// - requests_* → requests, 1d (reset_requests_ms from the report's timestamp)
// - tokens_*   → tokens, 1m (reset_tokens_ms likewise)
// - tokens_*   → tokens, 1d: limit × 100, remaining × 100 (no reset time)
//
// It is injected where the real derive function is used (the hot headroom hook, the alerts), so
// everything else runs its real path. Once part A lands, Groq's headers through deriveWindows
// replace it.

export function groqLikeWindows(source: WindowSource): DerivedWindows {
  const { at, limits: record } = source;
  const windows: Window[] = [];
  if (record.requests_limit !== null || record.requests_remaining !== null) {
    windows.push({
      dimension: "requests",
      window: "1d",
      limit: record.requests_limit,
      remaining: record.requests_remaining,
      resets_at: record.reset_requests_ms === null ? null : at + record.reset_requests_ms,
    });
  }
  if (record.tokens_limit !== null || record.tokens_remaining !== null) {
    windows.push({
      dimension: "tokens",
      window: "1m",
      limit: record.tokens_limit,
      remaining: record.tokens_remaining,
      resets_at: record.reset_tokens_ms === null ? null : at + record.reset_tokens_ms,
    });
    const times100 = (v: number | null) => (v === null ? null : v * 100);
    windows.push({
      dimension: "tokens",
      window: "1d",
      limit: times100(record.tokens_limit),
      remaining: times100(record.tokens_remaining),
      resets_at: null,
    });
  }
  return { windows, warnings: [], parser: "test-groq-like@1" };
}
