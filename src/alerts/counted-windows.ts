import type { WindowLength } from "../providers/window.js";
import {
  REPORT_COLUMNS,
  type ReportColumn,
  type ReportRow,
  USAGE_COLUMNS,
} from "../report/report-schema.js";

// Counted windows (docs/providers.md): where a window has a limit (learned from a 429, or declared
// by the project) but the provider states no remaining, what the reports say was used is counted
// against it: one request per report, and the tokens of its `usage`. Reports are counted into
// buckets of fixed periods by their timestamp; a window's use is the sum of the buckets of its
// current period (a fixed UTC minute, hour, day or month, or Pacific midnight for Gemini's daily
// quota), or, for a rolling window, of the buckets that lie wholly inside it. A counted remaining
// is therefore a floor of what was used: calls no app reported are not seen, nor, for a rolling
// window, the part of its oldest bucket it still covers. Pure.

/** The periods a report is counted in: UTC minute, hour, day and month, and the Pacific day. */
export const PERIOD_KINDS = ["m", "h", "d", "p", "M"] as const;
export type PeriodKind = (typeof PERIOD_KINDS)[number];

/** How a counted window resets (every view says it: `resets`). */
export const RESET_KINDS = [
  "utc_minute",
  "utc_hour",
  "utc_day",
  "pacific_day",
  "utc_month",
  "rolling",
] as const;
export type ResetKind = (typeof RESET_KINDS)[number];

/** The dimensions a report's count says something of. */
export const COUNTED_DIMENSIONS = ["requests", "tokens", "input_tokens", "output_tokens"] as const;
export type CountedDimension = (typeof COUNTED_DIMENSIONS)[number];

/**
 * Per bucket (`<kind>:<start ms>`): requests, tokens, input tokens, output tokens counted in it,
 * and the newest counted report's timestamp.
 */
export type HotCounts = Record<string, HotBucket>;
export type HotBucket = [number, number, number, number, number];

/** What one report says was used, per dimension (null: it says nothing of it). */
export interface ReportUse {
  /** The report's timestamp, Unix ms. */
  t: number;
  requests: number | null;
  input_tokens: number | null;
  output_tokens: number | null;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

/**
 * How long before now a kind's buckets are kept: enough for the longest window counted from them
 * (a minute; a rolling 5 h from hours; a rolling 7 d from days; a Pacific day; a month), and never
 * more, so that a series keeps about twenty. A bucket ahead of now (a client's clock) is kept.
 */
export const KEEP_MS: Record<PeriodKind, number> = {
  m: MINUTE,
  h: 5 * HOUR,
  d: 7 * DAY,
  p: DAY + HOUR,
  M: 31 * DAY,
};

const PACIFIC = new Intl.DateTimeFormat("en-US", {
  timeZone: "America/Los_Angeles",
  year: "numeric",
  month: "numeric",
  day: "numeric",
  hour: "numeric",
  minute: "numeric",
  second: "numeric",
  hourCycle: "h23",
});

/** The Pacific wall clock at `t` as if it were UTC, and the date it is on. */
function pacificWall(t: number): { wall: number; y: number; m: number; d: number } {
  const parts: Record<string, number> = {};
  for (const p of PACIFIC.formatToParts(t))
    if (p.type !== "literal") parts[p.type] = Number(p.value);
  const y = parts.year as number;
  const m = parts.month as number;
  const d = parts.day as number;
  const wall = Date.UTC(y, m - 1, d, parts.hour, parts.minute, parts.second);
  return { wall, y, m, d };
}

const pacificStarts = new Map<number, number>();

/** When the Pacific day holding `t` began (midnight in Los Angeles, DST or not), Unix ms. */
export function pacificDayStart(t: number): number {
  const hour = Math.floor(t / HOUR) * HOUR;
  const kept = pacificStarts.get(hour);
  if (kept !== undefined) return kept;
  const { y, m, d } = pacificWall(t);
  const midnight = Date.UTC(y, m - 1, d);
  // The offset at t, then at the first guess: a change of offset (at 2 a.m.) between midnight
  // and t is thereby taken into account.
  const offsetAt = (x: number) => pacificWall(x).wall - Math.floor(x / 1000) * 1000;
  let start = midnight - offsetAt(t);
  start = midnight - offsetAt(start);
  if (pacificStarts.size >= 4_096) pacificStarts.clear();
  pacificStarts.set(hour, start);
  return start;
}

/** The start of `kind`'s period holding `t`, Unix ms. */
export function periodStart(kind: PeriodKind, t: number): number {
  switch (kind) {
    case "m":
      return Math.floor(t / MINUTE) * MINUTE;
    case "h":
      return Math.floor(t / HOUR) * HOUR;
    case "d":
      return Math.floor(t / DAY) * DAY;
    case "p":
      return pacificDayStart(t);
    case "M": {
      const date = new Date(t);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    }
  }
}

/** The end of `kind`'s period that starts at `start` (the next one's start), Unix ms. */
export function periodEnd(kind: PeriodKind, start: number): number {
  switch (kind) {
    case "m":
      return start + MINUTE;
    case "h":
      return start + HOUR;
    case "d":
      return start + DAY;
    // A Pacific day is 23, 24 or 25 hours long: the day that holds a time 26 h on is the next.
    case "p":
      return pacificDayStart(start + 26 * HOUR);
    case "M": {
      const date = new Date(start);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
    }
  }
}

/**
 * How a window of `provider` and `length` resets when counted, or null when it is not counted
 * (1 s and 10 s: reports arrive in batches, a count so short says nothing). Gemini's requests
 * per day reset at midnight Pacific time and its minutes at second 00
 * (https://ai.google.dev/gemini-api/docs/rate-limits); every other provider's minute, hour, day
 * and month are counted as fixed UTC periods — a floor of a rolling window of that length, whose
 * use in its last fixed period is never more than its own — and 5 h and 7 d as rolling windows.
 */
export function resetKindOf(provider: string, length: WindowLength | null): ResetKind | null {
  switch (length) {
    case "1m":
      return "utc_minute";
    case "1h":
      return "utc_hour";
    case "1d":
      return GOOGLE.has(provider) ? "pacific_day" : "utc_day";
    case "1mo":
      return "utc_month";
    case "5h":
    case "7d":
      return "rolling";
    default:
      return null;
  }
}

/** The provider names Headroom reads as Gemini (parsers/registry.ts's aliases). */
const GOOGLE = new Set([
  "gemini",
  "google",
  "google-ai",
  "google-gemini",
  "vertex",
  "vertex-ai",
  "vertexai",
]);

/** The period a fixed window is counted in. */
export const FIXED: Partial<Record<ResetKind, PeriodKind>> = {
  utc_minute: "m",
  utc_hour: "h",
  utc_day: "d",
  pacific_day: "p",
  utc_month: "M",
};
/** A rolling window's length, and the buckets it is counted from. */
export const ROLLING: Partial<Record<WindowLength, { ms: number; kind: PeriodKind }>> = {
  "5h": { ms: 5 * HOUR, kind: "h" },
  "7d": { ms: 7 * DAY, kind: "d" },
};

const FIELD: Record<CountedDimension, number> = {
  requests: 0,
  tokens: 1,
  input_tokens: 2,
  output_tokens: 3,
};

export const bucketKey = (kind: PeriodKind, start: number) => `${kind}:${start}`;

/** A bucket key's kind and start, or null for one that is none (a copy gone wrong). */
export function parseBucketKey(key: string): { kind: PeriodKind; start: number } | null {
  const kind = key[0] as PeriodKind;
  const start = Number(key.slice(2));
  return PERIOD_KINDS.includes(kind) && key[1] === ":" && Number.isFinite(start)
    ? { kind, start }
    : null;
}

/** Adds one report's use to `counts`, in every period kind. */
export function countReport(counts: HotCounts, use: ReportUse): void {
  if (!Number.isFinite(use.t)) return;
  const tokens =
    use.input_tokens === null && use.output_tokens === null
      ? 0
      : (use.input_tokens ?? 0) + (use.output_tokens ?? 0);
  for (const kind of PERIOD_KINDS) {
    const key = bucketKey(kind, periodStart(kind, use.t));
    const b = counts[key] ?? [0, 0, 0, 0, use.t];
    b[0] += use.requests ?? 0;
    b[1] += tokens;
    b[2] += use.input_tokens ?? 0;
    b[3] += use.output_tokens ?? 0;
    b[4] = Math.max(b[4], use.t);
    counts[key] = b;
  }
}

/** `b`'s counts added to `a`'s (two batches, or a pool's members). */
export function addCounts(a: HotCounts, b: HotCounts): HotCounts {
  for (const [key, bucket] of Object.entries(b)) {
    if (!Array.isArray(bucket)) continue;
    const kept = a[key];
    a[key] = kept
      ? [
          kept[0] + bucket[0],
          kept[1] + bucket[1],
          kept[2] + bucket[2],
          kept[3] + bucket[3],
          Math.max(kept[4], bucket[4]),
        ]
      : [...bucket];
  }
  return a;
}

/**
 * Buckets of one kind kept ahead of the server's clock: reports may be dated up to a day ahead
 * (a fast clock, a client replaying), and each future minute would otherwise keep a bucket for a
 * day. Past this many, the furthest ahead are dropped (the hot copy's merge prunes with it).
 */
export const FUTURE_BUCKETS_PER_KIND = 16;

/**
 * Drops the buckets that started more than KEEP_MS before `now`, and of those that start after
 * it, all but the FUTURE_BUCKETS_PER_KIND nearest of each kind (the hot copy's merge prunes with it).
 */
export function pruneCounts(counts: HotCounts, now: number): HotCounts {
  const ahead = new Map<PeriodKind, { start: number; key: string }[]>();
  for (const key of Object.keys(counts)) {
    const k = parseBucketKey(key);
    if (!k || k.start < now - KEEP_MS[k.kind]) delete counts[key];
    else if (k.start > now)
      ahead.set(k.kind, [...(ahead.get(k.kind) ?? []), { start: k.start, key }]);
  }
  for (const buckets of ahead.values()) {
    buckets.sort((a, b) => a.start - b.start);
    for (const { key } of buckets.slice(FUTURE_BUCKETS_PER_KIND)) delete counts[key];
  }
  return counts;
}

export interface CountedUse {
  /** What the reports say was used in the window at `now`. */
  used: number;
  /** When the window resets: its period's end, or null for a rolling one. */
  resetsAt: number | null;
  /** The newest counted report in it (Unix ms), or null when none is. */
  newest: number | null;
}

/** The use of a window of `dimension` counted at `now`, as `reset` says it resets. */
export function countedUse(
  counts: HotCounts | undefined,
  dimension: CountedDimension,
  length: WindowLength | null,
  reset: ResetKind,
  now: number,
): CountedUse {
  const field = FIELD[dimension];
  let used = 0;
  let newest: number | null = null;
  const add = (b: HotBucket | undefined) => {
    if (!Array.isArray(b)) return;
    used += Number(b[field]) || 0;
    if (b[0] + b[1] > 0) newest = Math.max(newest ?? b[4], b[4]);
  };
  const fixed = FIXED[reset];
  if (fixed) {
    const start = periodStart(fixed, now);
    add(counts?.[bucketKey(fixed, start)]);
    return { used, resetsAt: periodEnd(fixed, start), newest };
  }
  const rolling = length === null ? undefined : ROLLING[length];
  if (rolling) {
    // The buckets wholly inside (now − length, now]: a floor of the window's use.
    for (const [key, b] of Object.entries(counts ?? {})) {
      const k = parseBucketKey(key);
      if (k?.kind === rolling.kind && k.start > now - rolling.ms && k.start <= now) add(b);
    }
  }
  return { used, resetsAt: null, newest };
}

/** Whether `dimension` is one a report's count says something of. */
export const isCounted = (dimension: string): dimension is CountedDimension =>
  (COUNTED_DIMENSIONS as readonly string[]).includes(dimension);

const USAGE_AT = USAGE_COLUMNS.map((c) => REPORT_COLUMNS.indexOf(c as ReportColumn));
const MODEL_AT = REPORT_COLUMNS.indexOf("model");

/** A usage count of a row, or null (none sent, or a row of a shape before usage). */
const usageOf = (row: ReportRow, i: number | undefined) => {
  const v = i === undefined || i < 0 ? null : row[i];
  const n = v === null || v === undefined ? Number.NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? n : null;
};

/**
 * What a stored row counts, or null when it counts nothing: a call whose provider states no
 * remaining is counted, one request and its `usage` (a limited one was refused; a provider hint,
 * no model and no figure, is no call). One definition for the hot copy and the alerts.
 */
export function countedCallOf(
  row: ReportRow,
  t: number,
  said: { limited: boolean; statesRemaining: boolean; figures: boolean },
): ReportUse | null {
  if (said.limited || said.statesRemaining) return null;
  if (row[MODEL_AT] === null && !said.figures) return null;
  return {
    t,
    requests: 1,
    input_tokens: usageOf(row, USAGE_AT[0]),
    output_tokens: usageOf(row, USAGE_AT[1]),
  };
}
