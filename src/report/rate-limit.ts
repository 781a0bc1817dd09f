import { googleRetryAt } from "../providers/parsers/gemini.js";
import { parseResetTime, resetAfter } from "../providers/reset-time.js";
import type { Window, WindowSource } from "../providers/window.js";
import { summariseError } from "./error-summary.js";

// A report whose error is a rate limit (a 429 in the body, Gemini's and Vertex's
// RESOURCE_EXHAUSTED, Bedrock's ThrottlingException: error-summary.ts says which) says that what
// it drew on ran out. A window it names (one its parser read at 0 remaining: a Gemini violation,
// a header at 0) is exhausted until that window's reset, which its parser took from the retry
// delay. When it names none, the pool as a whole is: every window of the model's pool, until the
// retry delay the answer states (`retry-after-ms`, `retry-after`, Google's `RetryInfo`), or each
// window's own reset, or, when none is known, until a later report that was not limited. Pure.

/** A rate limit that names no window: the pool is exhausted until `until` (null: not stated). */
export interface PoolExhausted {
  until: number | null;
}

/** Whether the report's error body says a rate limit or quota was hit. */
export function isRateLimited(source: Pick<WindowSource, "error">): boolean {
  if (source.error === null || source.error === undefined) return false;
  return summariseError(source.error)?.rate_limited === true;
}

/** The retry delay a report states, as an absolute time (Unix ms), or null. */
export function retryAtOf(source: WindowSource): number | null {
  const h = source.headers ?? {};
  for (const name of ["retry-after-ms", "x-ms-retry-after-ms"]) {
    const v = h[name]?.trim();
    if (v === undefined || !/^\d+(?:\.\d+)?$/.test(v)) continue;
    const reset = resetAfter(Number(v), source.at);
    if (reset.ok) return reset.resets_at;
  }
  const after = h["retry-after"];
  if (after !== undefined) {
    const reset = parseResetTime(after, source.at);
    if (reset.ok) return reset.resets_at;
  }
  return googleRetryAt(source.error, source.at);
}

/**
 * The pool-wide exhaustion a report states: a rate limit none of whose windows (as its parser
 * derived them) is at 0 remaining. Null when it is no rate limit, or names its window.
 */
export function poolExhaustedBy(source: WindowSource, windows: Window[]): PoolExhausted | null {
  if (!isRateLimited(source)) return null;
  if (windows.some((w) => w.remaining !== null && w.remaining <= 0)) return null;
  return { until: retryAtOf(source) };
}
