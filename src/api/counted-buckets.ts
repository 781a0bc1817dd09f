import {
  type CountedDimension,
  FIXED,
  periodEnd,
  periodStart,
  ROLLING,
  type ResetKind,
} from "../alerts/counted-windows.js";
import type { WindowLength } from "../providers/window.js";

// A counted window's % used in each bucket of /usage (docs/read-api.md): the worst moment in the
// bucket. For a fixed window, what its period counted from its start up to the bucket's end (or
// the period's, when a period ends inside the bucket) ÷ its limit; for a rolling one (5 h, 7 d),
// as counted-windows.ts counts it at a moment — its hours' or days' buckets wholly inside — at
// the moments its oldest bucket leaves it and at the bucket's end. Counted from slots: what the
// reports of a minute (or an hour, where no minute window needs finer) counted. Pure.

/** What the counted reports of one slot (a minute or an hour from `start`) say was used. */
export interface CountedSlot {
  /** Unix ms. */
  start: number;
  requests: number;
  input: number;
  output: number;
}

/** A window with a limit that is counted (a learned or declared one; resetKindOf not null). */
export interface CountedLimit {
  dimension: CountedDimension;
  window: WindowLength;
  limit: number;
  reset: ResetKind;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

const SLOT_VALUE: Record<CountedDimension, (s: CountedSlot) => number> = {
  requests: (s) => s.requests,
  tokens: (s) => s.input + s.output,
  input_tokens: (s) => s.input,
  output_tokens: (s) => s.output,
};

/** The first time whose slots the buckets from `from` on need for `limits`, hour-aligned. */
export function countedSince(limits: readonly CountedLimit[], from: number): number {
  let since = from;
  for (const l of limits) {
    const fixed = FIXED[l.reset];
    const rolling = ROLLING[l.window];
    const start = fixed
      ? periodStart(fixed, from)
      : rolling
        ? periodStart(rolling.kind, from - rolling.ms)
        : from;
    since = Math.min(since, start);
  }
  return Math.floor(since / HOUR) * HOUR;
}

/** Per bucket start, the most one period of a kind counted in the bucket, per dimension. */
export type Peaks = Partial<Record<"m" | "h", Map<number, Record<CountedDimension, number>>>>;

/**
 * The fixed period whose worst moment in a bucket of `span` ms is its busiest one, when the bucket
 * holds several (a minute window in hour or day buckets, an hour window in day buckets), or null.
 */
export function peakKindOf(limit: CountedLimit, span: number): "m" | "h" | null {
  const kind = FIXED[limit.reset];
  if (kind === "m" && span > MINUTE) return "m";
  if (kind === "h" && span > HOUR) return "h";
  return null;
}

/**
 * Which slots the buckets of [from, to) (each `span` ms, the range aligned to them) need for
 * `limits`: days in [since, hoursFrom), hours in [hoursFrom, minutesFrom), minutes from
 * minutesFrom to `to` (a part may be empty), and the per-bucket peaks of `peaks`. Every sum
 * worstCountedPct takes then starts and ends on a slot's edge: a month, a UTC day or a rolling
 * week starts at a UTC day's, a Pacific day, an hour or a rolling 5 h at an hour's, a bucket at
 * its own.
 */
export interface SlotPlan {
  since: number;
  hoursFrom: number;
  minutesFrom: number;
  peaks: ("m" | "h")[];
}

export function slotPlan(
  limits: readonly CountedLimit[],
  from: number,
  to: number,
  span: number,
): SlotPlan {
  const peaks = new Set<"m" | "h">();
  const summed: CountedLimit[] = [];
  for (const l of limits) {
    const peak = peakKindOf(l, span);
    if (peak) peaks.add(peak);
    else summed.push(l);
  }
  // Peaks alone: no slot is summed.
  if (summed.length === 0) return { since: to, hoursFrom: to, minutesFrom: to, peaks: [...peaks] };
  const minutesFrom = span <= MINUTE ? from : to;
  let hours = span <= HOUR ? from : to;
  for (const l of summed)
    if (l.reset === "utc_hour" || l.reset === "pacific_day" || ROLLING[l.window]?.kind === "h")
      hours = Math.min(hours, countedSince([l], from));
  const since = countedSince(summed, from);
  const hoursFrom = Math.max(since, Math.floor(Math.min(hours, minutesFrom) / DAY) * DAY);
  return { since, hoursFrom, minutesFrom, peaks: [...peaks].sort() };
}

/** A dimension's slots as sums from the first: any span's count in O(log n). */
export class SlotSums {
  private readonly starts: number[];
  private readonly sums: Record<CountedDimension, number[]>;

  /** `slots` in order of start, none straddling a period a limit is counted in. */
  constructor(slots: readonly CountedSlot[]) {
    this.starts = slots.map((s) => s.start);
    const prefix = (f: (s: CountedSlot) => number) => {
      const out = [0];
      for (const s of slots) out.push((out[out.length - 1] as number) + f(s));
      return out;
    };
    this.sums = {
      requests: prefix(SLOT_VALUE.requests),
      tokens: prefix(SLOT_VALUE.tokens),
      input_tokens: prefix(SLOT_VALUE.input_tokens),
      output_tokens: prefix(SLOT_VALUE.output_tokens),
    };
  }

  /** The index of the first slot starting at or after `t`. */
  private lower(t: number): number {
    let lo = 0;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.starts[mid] as number) < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** What the slots starting in [from, to) counted of `dimension`. */
  sum(dimension: CountedDimension, from: number, to: number): number {
    const s = this.sums[dimension];
    return (s[this.lower(to)] as number) - (s[this.lower(from)] as number);
  }
}

/**
 * The most a counted window used in the bucket [start, end), as a % of its limit (at most 100):
 * from `peaks` where slotPlan planned them for it.
 */
export function worstCountedPct(
  sums: SlotSums,
  limit: CountedLimit,
  start: number,
  end: number,
  peaks: Peaks = {},
): number {
  let worst = 0;
  const fixed = FIXED[limit.reset];
  const rolling = ROLLING[limit.window];
  const peak = peakKindOf(limit, end - start);
  const busiest = peak === null ? undefined : peaks[peak];
  if (busiest) {
    worst = busiest.get(start)?.[limit.dimension] ?? 0;
  } else if (fixed) {
    for (let p = periodStart(fixed, start); p < end; p = periodEnd(fixed, p))
      worst = Math.max(worst, sums.sum(limit.dimension, p, Math.min(periodEnd(fixed, p), end)));
  } else if (rolling) {
    // At τ it holds the buckets of its kind starting in (τ − length, τ]: at most just before its
    // oldest leaves it, or at the bucket's end.
    const at = (tau: number) =>
      sums.sum(
        limit.dimension,
        periodEnd(rolling.kind, periodStart(rolling.kind, tau - rolling.ms)),
        tau + 1,
      );
    worst = at(end - 1);
    for (
      let k = periodStart(rolling.kind, start - rolling.ms);
      k + rolling.ms < end;
      k = periodEnd(rolling.kind, k)
    )
      if (k + rolling.ms > start) worst = Math.max(worst, at(k + rolling.ms - 1));
  }
  return Math.min(100, (worst / limit.limit) * 100);
}
