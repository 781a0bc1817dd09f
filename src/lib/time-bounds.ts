// The times Headroom takes from a tenant, and the times it writes. A tenant's figure becomes a
// time only within these bounds: a reset or retry delay past what any provider states, or an
// absolute time outside the range below, is no time (stored as null with a warning where it
// enters; read as unknown where a row stored before the bounds holds one). `new Date(ms)`
// formats only within ±8.64e15 ms and throws past it: nothing past these bounds reaches it.

/** The longest reset or retry delay taken: a year (the longest window a provider states is a month). */
export const MAX_RESET_DELAY_MS = 365 * 24 * 60 * 60 * 1000;

/** The earliest absolute reset taken: report timestamps start here too (report-schema.ts). */
export const MIN_RESET_AT_MS = Date.UTC(2000, 0, 1);

/** Times the read side formats: 1970-01-01 to the end of 2299 (ClickHouse DateTime64(3)'s last year). */
export const MIN_TIME_MS = 0;
export const MAX_TIME_MS = Date.UTC(2299, 11, 31, 23, 59, 59, 999);

/** Whether `ms` is a time the read side formats (false for NaN, ±Infinity and non-numbers). */
export const isTime = (ms: unknown): ms is number =>
  typeof ms === "number" && ms >= MIN_TIME_MS && ms <= MAX_TIME_MS;

/** Texts of recent times: an answer made again writes the same report times each time. */
const isoTexts = new Map<number, string>();
const ISO_TEXTS_MAX = 4_096;

/** The ISO text of a time within the bounds (isTime), remembered. */
export function isoText(ms: number): string {
  let text = isoTexts.get(ms);
  if (text === undefined) {
    if (isoTexts.size >= ISO_TEXTS_MAX) isoTexts.clear();
    text = new Date(ms).toISOString();
    isoTexts.set(ms, text);
  }
  return text;
}

/** The ISO text of a time within the bounds; null for anything else, never a throw. */
export const isoOrNull = (ms: number | null | undefined): string | null =>
  isTime(ms) ? isoText(ms) : null;

/** `ms` within the read side's range: its nearest end when outside, 1970 for NaN. */
export const clampTime = (ms: number): number =>
  Number.isNaN(ms) ? MIN_TIME_MS : Math.min(Math.max(ms, MIN_TIME_MS), MAX_TIME_MS);

/** Whether a relative reset or retry delay, in ms, is one Headroom takes: within a year either way. */
export const isResetDelay = (ms: unknown): ms is number =>
  typeof ms === "number" && Math.abs(ms) <= MAX_RESET_DELAY_MS;

/**
 * Whether an absolute reset stated at `at` (Unix ms) is one Headroom takes: from 2000 to a year
 * after `at` (to the end of MAX_TIME_MS when `at` is unknown).
 */
export function isResetAt(resetsAt: unknown, at: number): resetsAt is number {
  if (typeof resetsAt !== "number" || !(resetsAt >= MIN_RESET_AT_MS)) return false;
  const latest = Number.isFinite(at) ? at + MAX_RESET_DELAY_MS : MAX_TIME_MS;
  return resetsAt <= Math.min(latest, MAX_TIME_MS);
}

/** The message of a warning for a reset out of these bounds. */
export const RESET_OUT_OF_RANGE = "reset time out of range (more than a year away, or before 2000)";
