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
  SlotSums,
  worstCountedPct,
} from "../../src/api/counted-buckets.js";
import type { WindowLength } from "../../src/providers/window.js";

// /usage's counted % of a bucket (issue 45): the worst moment in the bucket, computed from slots
// of a minute (an hour before the range, as the query reads them), checked against a tiny
// reference model: the hot copy's own counting (countReport, countedUse) of the reports up to
// each minute's end in the bucket (and its start), at its worst.

const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

interface Report {
  t: number;
  input: number;
  output: number;
}

/** Slots as reports_minute's query gives them: hours before `fine`, minutes from it. */
function slotsOf(reports: Report[], fine: number): CountedSlot[] {
  const slots = new Map<number, CountedSlot>();
  for (const r of reports) {
    const start = r.t < fine ? Math.floor(r.t / HOUR) * HOUR : Math.floor(r.t / MIN) * MIN;
    const s = slots.get(start) ?? { start, requests: 0, input: 0, output: 0 };
    s.requests += 1;
    s.input += r.input;
    s.output += r.output;
    slots.set(start, s);
  }
  return [...slots.values()].sort((a, b) => a.start - b.start);
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
  it("gives each bucket the worst moment the hot copy's counting gives, for every window kind", () => {
    const seed = Date.now() % 1_000_000;
    console.log(`counted buckets: seed ${seed}`);
    fc.assert(
      fc.property(
        fc.constantFrom(...ORIGINS),
        fc.constantFrom(MIN, HOUR, DAY),
        // Where the reports fall: most in the buckets asked, some in the days before them.
        fc.array(
          fc.record({
            near: fc.integer({ min: 0, max: 3 }),
            at: fc.integer({ min: 0, max: 999_999 }),
            input: fc.integer({ min: 0, max: 500 }),
            output: fc.integer({ min: 0, max: 50 }),
          }),
          { maxLength: 30 },
        ),
        fc.constantFrom(...LENGTHS),
        fc.constantFrom(...DIMENSIONS),
        fc.constantFrom("gemini", "bedrock"),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 0, max: 23 }),
        (origin, span, raw, window, dimension, provider, limitValue, fromHour) => {
          const reset = resetKindOf(provider, window);
          if (!reset) return;
          const limit: CountedLimit = { dimension, window, limit: limitValue, reset };
          const buckets = span === DAY ? 2 : 4;
          const from = origin + 8 * DAY + (span === DAY ? 0 : fromHour * HOUR + 23 * MIN);
          const reports = raw.map((r) => ({
            t:
              r.near > 0
                ? from + Math.floor((r.at / 1e6) * buckets * span)
                : from - Math.floor((r.at / 1e6) * 8 * DAY),
            input: r.input,
            output: r.output,
          }));
          const fine = Math.floor(from / HOUR) * HOUR;
          // What the query reads: from countedSince on.
          const since = countedSince([limit], from);
          const sums = new SlotSums(
            slotsOf(
              reports.filter((r) => r.t >= since),
              fine,
            ),
          );
          for (let b = from; b < from + buckets * span; b += span) {
            const got = worstCountedPct(sums, limit, b, b + span);
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
});
