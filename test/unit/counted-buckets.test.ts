import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type CountedDimension,
  countedUse,
  countReport,
  type HotCounts,
  resetKindOf,
} from "../../src/alerts/counted-windows.js";
import {
  type CountedLimit,
  type CountedSlot,
  countedSince,
  type Peaks,
  type SlotPlan,
  SlotSums,
  slotPlan,
  worstCountedPct,
} from "../../src/api/counted-buckets.js";
import type { WindowLength } from "../../src/providers/window.js";

// /usage's counted % of a bucket (issue 45): the worst moment in the bucket, computed from slots
// of a day, an hour or a minute and per-bucket peaks as slotPlan asks them for a project's
// limits together (issue 48), checked against a tiny reference model: the hot copy's own
// counting (countReport, countedUse) of the reports up to each minute's end in the bucket (and
// its start), at its worst.

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

interface Report {
  t: number;
  input: number;
  output: number;
}

/** Slots and peaks as the counted query gives them for `plan` (days, hours, minutes; busiest). */
function slotsOf(
  reports: Report[],
  plan: SlotPlan,
  from: number,
  to: number,
  span: number,
): { sums: SlotSums; peaks: Peaks } {
  const slots = new Map<number, CountedSlot>();
  for (const r of reports) {
    if (r.t < plan.since || r.t >= to) continue;
    const grain = r.t < plan.hoursFrom ? DAY : r.t < plan.minutesFrom ? HOUR : MIN;
    const start = Math.floor(r.t / grain) * grain;
    const s = slots.get(start) ?? { start, requests: 0, input: 0, output: 0 };
    s.requests += 1;
    s.input += r.input;
    s.output += r.output;
    slots.set(start, s);
  }
  const peaks: Peaks = {};
  for (const kind of plan.peaks) {
    const grain = kind === "m" ? MIN : HOUR;
    const periods = new Map<number, Record<CountedDimension, number>>();
    for (const r of reports) {
      if (r.t < from || r.t >= to) continue;
      const start = Math.floor(r.t / grain) * grain;
      const p = periods.get(start) ?? { requests: 0, tokens: 0, input_tokens: 0, output_tokens: 0 };
      p.requests += 1;
      p.tokens += r.input + r.output;
      p.input_tokens += r.input;
      p.output_tokens += r.output;
      periods.set(start, p);
    }
    const most = new Map<number, Record<CountedDimension, number>>();
    for (const [start, p] of periods) {
      const b = Math.floor(start / span) * span;
      const m = most.get(b) ?? { requests: 0, tokens: 0, input_tokens: 0, output_tokens: 0 };
      for (const d of DIMENSIONS) m[d] = Math.max(m[d], p[d]);
      most.set(b, m);
    }
    peaks[kind] = most;
  }
  return {
    sums: new SlotSums([...slots.values()].sort((a, b) => a.start - b.start)),
    peaks,
  };
}

/** The reference: the window's use as the hot copy counts it at each moment of the bucket. */
function reference(reports: Report[], limit: CountedLimit, start: number, end: number): number {
  const moments = [start];
  for (let m = start + MIN - 1; m < end; m += MIN) moments.push(m);
  let worst = 0;
  for (const tau of moments) {
    const counts: HotCounts = {};
    for (const r of reports)
      if (r.t <= tau)
        countReport(counts, {
          t: r.t,
          requests: 1,
          input_tokens: r.input,
          output_tokens: r.output,
        });
    const { used } = countedUse(counts, limit.dimension, limit.window, limit.reset, tau);
    worst = Math.max(worst, used);
  }
  return Math.min(100, (worst / limit.limit) * 100);
}

const LENGTHS: WindowLength[] = ["1m", "1h", "5h", "1d", "7d", "1mo"];
const DIMENSIONS: CountedDimension[] = ["requests", "tokens", "input_tokens", "output_tokens"];
// Around the change to daylight saving time in Los Angeles (2026-03-08) and a month's end.
const ORIGINS = [Date.UTC(2026, 2, 3), Date.UTC(2026, 9, 26), Date.UTC(2026, 0, 27, 13, 17)];

describe("counted buckets", () => {
  it("gives each bucket the worst moment the hot copy's counting gives, for every window kind and mix", () => {
    const seed = Date.now() % 1_000_000;
    console.log(`counted buckets: seed ${seed}`);
    const limitArb = fc.record({
      window: fc.constantFrom(...LENGTHS),
      dimension: fc.constantFrom(...DIMENSIONS),
      limit: fc.integer({ min: 1, max: 40 }),
    });
    fc.assert(
      fc.property(
        fc.constantFrom(...ORIGINS),
        fc.constantFrom(MIN, HOUR, DAY),
        // Where the reports fall: most in the buckets asked, some in the days and weeks before.
        fc.array(
          fc.record({
            near: fc.integer({ min: 0, max: 4 }),
            at: fc.integer({ min: 0, max: 999_999 }),
            input: fc.integer({ min: 0, max: 500 }),
            output: fc.integer({ min: 0, max: 50 }),
          }),
          { maxLength: 30 },
        ),
        // A project's limits together: the slots asked are those the finest of them needs.
        fc.array(limitArb, { minLength: 1, maxLength: 3 }),
        fc.constantFrom("gemini", "bedrock"),
        fc.integer({ min: 0, max: 23 }),
        (origin, span, raw, drawn, provider, fromHour) => {
          const limits: CountedLimit[] = [];
          for (const d of drawn) {
            const reset = resetKindOf(provider, d.window);
            if (reset) limits.push({ ...d, reset });
          }
          if (limits.length === 0) return;
          const buckets = span === DAY ? 2 : 4;
          // The range aligned to its buckets, as /usage aligns it.
          const from = Math.floor((origin + 40 * DAY + fromHour * HOUR + 23 * MIN) / span) * span;
          const to = from + buckets * span;
          const reports = raw.map((r) => ({
            t:
              r.near > 1
                ? from + Math.floor((r.at / 1e6) * buckets * span)
                : from - Math.floor((r.at / 1e6) * (r.near === 1 ? 2 * DAY : 35 * DAY)),
            input: r.input,
            output: r.output,
          }));
          const plan = slotPlan(limits, from, to, span);
          const { sums, peaks } = slotsOf(reports, plan, from, to, span);
          for (const limit of limits)
            for (let b = from; b < to; b += span) {
              const got = worstCountedPct(sums, limit, b, b + span, peaks);
              expect(got).toBeCloseTo(reference(reports, limit, b, b + span), 9);
            }
        },
      ),
      { seed, numRuns: 100 },
    );
  });

  it("needs a Pacific day's slots from its midnight and a rolling week's from 7 days before", () => {
    const from = Date.UTC(2026, 6, 4, 20, 30);
    const l = (window: WindowLength, reset: CountedLimit["reset"]): CountedLimit => ({
      dimension: "requests",
      window,
      limit: 1,
      reset,
    });
    // 2026-07-04 is daylight saving time: midnight in Los Angeles is 07:00 UTC.
    expect(countedSince([l("1d", "pacific_day")], from)).toBe(Date.UTC(2026, 6, 4, 7));
    expect(countedSince([l("7d", "rolling")], from)).toBe(Date.UTC(2026, 5, 27));
    expect(countedSince([l("1m", "utc_minute")], from)).toBe(Date.UTC(2026, 6, 4, 20));
  });

  it("reads a month's days before the range's day, its hours up to the range, and a minute window as peaks", () => {
    const from = Date.UTC(2026, 10, 28, 13);
    const to = from + DAY;
    const l = (window: WindowLength, reset: CountedLimit["reset"]): CountedLimit => ({
      dimension: "requests",
      window,
      limit: 1,
      reset,
    });
    expect(slotPlan([l("1mo", "utc_month")], from, to, HOUR)).toEqual({
      since: Date.UTC(2026, 10, 1),
      hoursFrom: Date.UTC(2026, 10, 28),
      minutesFrom: to,
      peaks: [],
    });
    // By day, a month is days throughout, and a minute window its buckets' busiest minutes.
    const days = { from: Date.UTC(2026, 10, 1), to: Date.UTC(2026, 10, 29) };
    expect(
      slotPlan([l("1mo", "utc_month"), l("1m", "utc_minute")], days.from, days.to, DAY),
    ).toEqual({ since: days.from, hoursFrom: days.to, minutesFrom: days.to, peaks: ["m"] });
  });
});
