import { invalidQuery } from "./params.js";

// The time range of a read query: `from`/`to` (default: the 24 hours before now), aligned to
// whole windows (UTC), and capped per window so that no query scans more than its window allows.

export const WINDOWS = ["minute", "hour", "day"] as const;
export type Window = (typeof WINDOWS)[number];

const DAY_MS = 86_400_000;
export const WINDOW_MS: Record<Window, number> = { minute: 60_000, hour: 3_600_000, day: DAY_MS };
export const MAX_RANGE_MS: Record<Window, number> = {
  minute: 7 * DAY_MS,
  hour: 90 * DAY_MS,
  day: 400 * DAY_MS,
};
export const DEFAULT_SPAN_MS = DAY_MS;

export interface Range {
  /** Unix ms, inclusive. */
  from: number;
  /** Unix ms, exclusive. */
  to: number;
}

/**
 * `from`/`to` as given; `to` defaults to now, `from` to 24 hours before `to`; from < to. `last`
 * (ms) is the span ending at the next whole minute, and comes alone.
 */
export function resolveRange(q: { from?: number; to?: number; last?: number }, now: number): Range {
  if (q.last !== undefined) {
    if (q.from !== undefined || q.to !== undefined) {
      throw invalidQuery("last: give either last or from/to, not both", [
        { path: "last", message: "give either last or from/to, not both" },
      ]);
    }
    // In whole minutes (the rollups' grain): `last=1h` is 60 minute windows, not 61.
    const to = Math.ceil(now / WINDOW_MS.minute) * WINDOW_MS.minute;
    return { from: to - q.last, to };
  }
  const to = q.to ?? now;
  const from = q.from ?? to - DEFAULT_SPAN_MS;
  if (!(from < to)) throw invalidQuery("from: must be before to");
  return { from, to };
}

/** Minute windows up to 6 hours, hour windows up to 30 days, day windows beyond. */
export function defaultWindow(range: Range): Window {
  const span = range.to - range.from;
  if (span <= 6 * 3_600_000) return "minute";
  if (span <= 30 * DAY_MS) return "hour";
  return "day";
}

/** The range widened to whole windows. */
export function widen(range: Range, window: Window): Range {
  const w = WINDOW_MS[window];
  return { from: Math.floor(range.from / w) * w, to: Math.ceil(range.to / w) * w };
}

/** The range widened to whole windows; 400 when it is over the window's cap. */
export function alignRange(range: Range, window: Window): Range {
  const aligned = widen(range, window);
  const max = MAX_RANGE_MS[window];
  if (aligned.to - aligned.from > max) {
    const wider =
      window === "minute" ? " or use window=hour" : window === "hour" ? " or use window=day" : "";
    throw invalidQuery(
      `from/to: ${window} windows cover at most ${max / DAY_MS} days; narrow the range${wider}`,
    );
  }
  return aligned;
}

/** Unix ms → the text of a ClickHouse DateTime64(3) parameter (UTC). */
export const chTime = (ms: number) => new Date(ms).toISOString().replace("T", " ").replace("Z", "");
/** Unix ms → the text of a ClickHouse DateTime parameter (whole seconds, UTC). */
export const chSeconds = (ms: number) => chTime(ms).slice(0, 19);
/** Unix ms → a ClickHouse Date parameter. */
export const chDate = (ms: number) => chTime(ms).slice(0, 10);
const WHOLE_SECONDS = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;

/** ClickHouse's UTC date-time text (`2025-01-31 12:00:00[.000]`) → RFC 3339. */
export function isoOf(text: string): string {
  // A usage answer has thousands of buckets: whole seconds are rewritten as text, not parsed.
  if (WHOLE_SECONDS.test(text)) return `${text.slice(0, 10)}T${text.slice(11)}.000Z`;
  return new Date(
    `${text.length === 10 ? `${text}T00:00:00` : text.replace(" ", "T")}Z`,
  ).toISOString();
}
