import { isResetAt, isResetDelay, RESET_OUT_OF_RANGE } from "../lib/time-bounds.js";

// When a provider's window resets, from any of the formats providers write it in, as an absolute
// Unix ms time. Relative values count from `at` (when the provider answered).
//
// The formats, tried in this order:
// - a bare number: epoch milliseconds from 1e12 (2001-09-09 in ms), epoch seconds from 1e9
//   (2001-09-09 in s), else seconds from `at` (possibly fractional: Cerebras "11.38"). A relative
//   reset of 1e9 s would be 31 years away, and no provider windows longer than a month, so the
//   magnitude tells the three apart;
// - a Go duration ("6m0s", "2m59.56s", "1h2m3.5s", "20ms") or a protobuf duration ("37s", "1.5s"),
//   from `at`;
// - an RFC 3339 timestamp ("2026-01-01T00:01:00Z", with an offset or fractional seconds);
// - an HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT", Retry-After's other form).
// Anything else, a negative value, or a time outside the bounds of src/lib/time-bounds.ts (more
// than a year after `at`, or before 2000) is not a reset: null, with a warning.

/** A bare number at or above this is epoch milliseconds. */
export const EPOCH_MS_FROM = 1e12;
/** A bare number at or above this (and below EPOCH_MS_FROM) is epoch seconds; below, seconds from now. */
export const EPOCH_SECONDS_FROM = 1e9;

export type ResetParse = { ok: true; resets_at: number } | { ok: false; message: string };

const NUMBER = /^\d+(?:\.\d+)?$/;
const GO_PART = /(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)/g;
const GO_DURATION = /^(?:\d+(?:\.\d+)?(?:h|ms|us|µs|ns|m|s))+$/;
const RFC_3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
const HTTP_DATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

const UNIT_MS: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 1e-3,
  µs: 1e-3,
  ns: 1e-6,
};

/** A Go or protobuf duration in ms, or null when `text` is not one. */
export function durationMs(text: string): number | null {
  if (!GO_DURATION.test(text)) return null;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(GO_PART)) {
    total += Number(amount) * (UNIT_MS[unit ?? ""] ?? Number.NaN);
  }
  return Number.isFinite(total) ? total : null;
}

/** An absolute reset stated at `at`, when within the bounds. */
export const resetWithin = (ms: number, at: number): ResetParse =>
  isResetAt(ms, at)
    ? { ok: true, resets_at: Math.round(ms) }
    : { ok: false, message: RESET_OUT_OF_RANGE };

/**
 * A reset `delayMs` after `at` (a relative reset, a retry delay): within a year, and counted from
 * a known `at`.
 */
export function resetAfter(delayMs: number, at: number): ResetParse {
  if (!Number.isFinite(at)) return { ok: false, message: "no answer time to count from" };
  if (!(delayMs >= 0 && isResetDelay(delayMs))) return { ok: false, message: RESET_OUT_OF_RANGE };
  return resetWithin(at + delayMs, at);
}

/** The absolute reset time (Unix ms) that `value` states, relative values counted from `at`. */
export function parseResetTime(value: string, at: number): ResetParse {
  const text = value.trim();
  if (text === "") return { ok: false, message: "empty reset time" };
  const fromAt = (ms: number): ResetParse => resetAfter(ms, at);
  const within = (ms: number): ResetParse => resetWithin(ms, at);
  if (NUMBER.test(text)) {
    const n = Number(text);
    if (n >= EPOCH_MS_FROM) return within(n);
    if (n >= EPOCH_SECONDS_FROM) return within(n * 1000);
    return fromAt(n * 1000);
  }
  const duration = durationMs(text);
  if (duration !== null) return fromAt(duration);
  if (RFC_3339.test(text) || HTTP_DATE.test(text)) {
    const ms = Date.parse(text);
    if (!Number.isNaN(ms)) return within(ms);
  }
  return { ok: false, message: `not a reset time: ${JSON.stringify(text.slice(0, 40))}` };
}
