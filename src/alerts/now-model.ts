import { clampTime, isoOrNull, isTime } from "../lib/time-bounds.js";
import { burnPerSecond, historyOf, type Point } from "./burn-rate.js";
import type { Metric } from "./rule.js";

/**
 * What Headroom believes about one window (a series' requests, tokens or credits) at the moment
 * of an answer, `at`. Pure; every view (/headroom, the exporter, /spend, the alerts) asks here.
 *
 * - Time-relative figures count from `at` (`resets_in_s`, `exhaustion_eta_s`), or are absolute
 *   (`resets_at`, `exhausted_at`): two reads without a new report count down.
 * - Once `resets_at` has passed, the figures reported before it say nothing of the new window:
 *   it is `reset_since_report`, its last figures kept for context but never warning or critical.
 * - What cannot be known (one report, no reset time, nothing burning) is null with a reason.
 * - One burn rate per window, in its unit (requests/s, tokens/s, credits/h), from the points of
 *   the current window only.
 *
 * Total: whatever it is fed (huge, negative, NaN, far past or future: a row stored before the
 * bounds of src/lib/time-bounds.ts, a hot copy gone wrong) it never throws, and every output is
 * in range: figures, burns and percentages finite or null (used_pct ≥ 0); times ISO text within
 * 1970–2299 or null; seconds finite, ≥ 0, or null. A figure that is not a finite number, or a
 * time outside 1970–2299, is no figure (null, with its reason); an `at` outside that range is
 * taken at its nearest end (NaN: 1970); an exhaustion past 2299 is `not_burning`.
 */

export const BURN_UNITS = {
  requests: "requests/s",
  tokens: "tokens/s",
  credits: "credits/h",
} as const satisfies Record<Metric, string>;
export type BurnUnit = (typeof BURN_UNITS)[Metric];

/** Per second, the burn's unit's own time: credits are spent over hours. */
const PER_UNIT_SECONDS: Record<Metric, number> = { requests: 1, tokens: 1, credits: 3600 };

/** Why a figure is null. */
export const UNKNOWN_REASONS = [
  "no_figures",
  "no_reset_time",
  "too_few_reports",
  "not_burning",
  "resets_first",
  "reset_since_report",
] as const;
export type UnknownReason = (typeof UNKNOWN_REASONS)[number];

export interface WindowFigures {
  limit: number | null;
  remaining: number | null;
  /** When these figures were reported, Unix ms. */
  reportedAt: number | null;
  /** When the provider said the window resets, Unix ms; null when it did not (credits never). */
  resetsAt: number | null;
}

export interface WindowNow {
  limit: number | null;
  remaining: number | null;
  used_pct: number | null;
  resets_at: string | null;
  /** Seconds from `at` to `resets_at`; 0 once it has passed. */
  resets_in_s: number | null;
  resets_unknown: UnknownReason | null;
  /** The window has reset since its last report: its figures are the previous window's. */
  reset_since_report: boolean;
  /** The burn rate in units per second (kept for readers of the first answers). */
  burn_per_s: number | null;
  /** The burn rate in `burn_unit`. */
  burn: number | null;
  burn_unit: BurnUnit;
  burn_unknown: UnknownReason | null;
  /** When `remaining` reaches zero at the burn rate (absolute). */
  exhausted_at: string | null;
  /** Seconds from `at` to `exhausted_at`; 0 once it is past. */
  exhaustion_eta_s: number | null;
  exhaustion_unknown: UnknownReason | null;
}

/** `n` to `digits` decimals; a number too large to scale is whole already. */
const round = (n: number, digits: number) => {
  const scaled = n * 10 ** digits;
  return Number.isFinite(scaled) ? Math.round(scaled) / 10 ** digits : n;
};
/** A finite number, else null (NaN, ±Infinity, and anything not a number). */
const figure = (n: unknown): number | null =>
  typeof n === "number" && Number.isFinite(n) ? n : null;
const finiteOrNull = (n: number): number | null => (Number.isFinite(n) ? n : null);

export function usedPct(limit: number | null, remaining: number | null): number | null {
  const l = figure(limit);
  const r = figure(remaining);
  if (l === null || r === null || !(l > 0)) return null;
  return finiteOrNull(round(Math.max(0, ((l - r) / l) * 100), 2));
}

/** A point the model reads: a time and a figure. */
const usablePoint = (p: Point) => isTime(p[0]) && figure(p[1]) !== null;

/** Units per second over a window's points (those that are a time and a figure), or null with a reason. */
export function burnOf(points: Point[]): { perS: number | null; unknown: UnknownReason | null } {
  // The points of the window the figures belong to, as the alerts keep them (burn-rate.ts): a
  // rise in `remaining` starts the history again (a reset, or a top-up).
  const perS = burnPerSecond(historyOf(points, usablePoint));
  if (perS === null || !Number.isFinite(perS)) return { perS: null, unknown: "too_few_reports" };
  return { perS, unknown: null };
}

export function windowNow(
  metric: Metric,
  fig: WindowFigures,
  points: Point[],
  at: number,
): WindowNow {
  // What is no figure or no time is unknown; the answer's own time is kept within the range.
  const limit = figure(fig.limit);
  const remaining = figure(fig.remaining);
  const reportedAt = isTime(fig.reportedAt) ? fig.reportedAt : null;
  const resetsAt = isTime(fig.resetsAt) ? fig.resetsAt : null;
  const now = clampTime(at);
  const reset = resetsAt !== null && reportedAt !== null && now >= resetsAt;
  const burn = burnOf(points);
  const perUnit = burn.perS === null ? null : finiteOrNull(burn.perS * PER_UNIT_SECONDS[metric]);
  const resetsUnknown: UnknownReason | null =
    resetsAt !== null ? null : remaining === null ? "no_figures" : "no_reset_time";
  const usedPctNow = usedPct(limit, remaining);
  const resetsAtText = isoOrNull(resetsAt);
  const resetsInS = resetsAt === null ? null : round(Math.max(0, resetsAt - now) / 1000, 1);
  const burnPerS = burn.perS === null ? null : round(burn.perS, 4);
  const burnInUnit = perUnit === null ? null : round(perUnit, 4);
  const burnUnknown = remaining === null ? ("no_figures" as const) : burn.unknown;
  // One literal with every field, in the answer's order: a literal that starts with a spread
  // and adds fields after it costs microseconds a call in V8 (each result gets a map of its own).
  const result = (
    exhaustedAt: string | null,
    etaS: number | null,
    why: UnknownReason | null,
  ): WindowNow => ({
    limit,
    remaining,
    used_pct: usedPctNow,
    resets_at: resetsAtText,
    resets_in_s: resetsInS,
    resets_unknown: resetsUnknown,
    reset_since_report: reset,
    burn_per_s: burnPerS,
    burn: burnInUnit,
    burn_unit: BURN_UNITS[metric],
    burn_unknown: burnUnknown,
    exhausted_at: exhaustedAt,
    exhaustion_eta_s: etaS,
    exhaustion_unknown: why,
  });
  const unknown = (why: UnknownReason) => result(null, null, why);
  if (remaining === null || reportedAt === null) return unknown("no_figures");
  if (reset) return unknown("reset_since_report");
  let exhaustedAt: number;
  if (remaining <= 0) exhaustedAt = reportedAt;
  else {
    if (burn.perS === null) return unknown("too_few_reports");
    if (!(burn.perS > 0)) return unknown("not_burning");
    exhaustedAt = reportedAt + Math.round((remaining / burn.perS) * 1000);
    if (resetsAt !== null && exhaustedAt >= resetsAt) return unknown("resets_first");
    // So slow that it runs out after any time a reader writes: not burning, for every reader.
    if (!isTime(exhaustedAt)) return unknown("not_burning");
  }
  return result(isoOrNull(exhaustedAt), round(Math.max(0, exhaustedAt - now) / 1000, 1), null);
}
