import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  addPoint,
  burnPerSecond,
  HISTORY_WINDOW_MS,
  historyOf,
  type Point,
} from "../../src/alerts/burn-rate.js";
import { windowNow } from "../../src/alerts/now-model.js";

// Burn rate from recent (time, remaining) points, and the time to exhaustion it implies, given
// the provider's reset time.

const feed = (points: Point[]) => points.reduce<Point[]>((h, p) => addPoint(h, p), []);

describe("burn rate", () => {
  it("is the fall in remaining per second across the history", () => {
    const h = feed([
      [0, 1000],
      [10_000, 900],
      [20_000, 800],
    ]);
    expect(burnPerSecond(h)).toBe(10);
  });

  it("needs at least a second of history", () => {
    expect(burnPerSecond(feed([[0, 1000]]))).toBeNull();
    expect(burnPerSecond(feed([]))).toBeNull();
  });

  it("starts again after a reset (remaining went up)", () => {
    const h = feed([
      [0, 1000],
      [10_000, 100],
      [11_000, 1000],
      [21_000, 990],
    ]);
    expect(h[0]).toEqual([11_000, 1000]);
    expect(burnPerSecond(h)).toBe(1);
  });

  it("forgets points older than its window and keeps a few points only", () => {
    const points: Point[] = Array.from({ length: 100 }, (_, i) => [i * 10_000, 100_000 - i * 10]);
    const h = feed(points);
    expect(h.length).toBeLessThanOrEqual(8);
    const last = h.at(-1) as Point;
    expect(last[0] - (h[0] as Point)[0]).toBeLessThanOrEqual(HISTORY_WINDOW_MS);
    expect(burnPerSecond(h)).toBeCloseTo(1, 6);
  });

  it("merges points within a second into the newest, keeping the oldest anchor", () => {
    const h = feed([
      [0, 1000],
      [5_000, 950],
      [5_200, 940],
      [5_400, 930],
    ]);
    expect(h).toEqual([
      [0, 1000],
      [5_400, 930],
    ]);
  });
});

describe("historyOf", () => {
  // Times mostly a little later than the last (often within a second, so points merge), now and
  // then earlier or minutes later; values mostly falling, now and then rising (a reset) or NaN.
  const points = fc
    .array(
      fc.record({
        step: fc.oneof(
          fc.integer({ min: 0, max: 2_500 }),
          fc.integer({ min: -400_000, max: 400_000 }),
        ),
        value: fc.oneof(
          fc.integer({ min: -3, max: 0 }),
          fc.integer({ min: 0, max: 50 }),
          fc.constant(Number.NaN),
        ),
      }),
      { maxLength: 60 },
    )
    .map((steps) => {
      let t = 1_000_000;
      let v = 1_000;
      return steps.map(({ step, value }): Point => {
        t += step;
        v = Number.isNaN(value) ? v : v + value;
        return [t, Number.isNaN(value) ? value : v];
      });
    });

  it("is the history addPoint makes of the same points fed one by one (seeded property)", () => {
    fc.assert(
      fc.property(points, fc.boolean(), (list, filtered) => {
        const keep = filtered ? (p: Point) => !Number.isNaN(p[1]) : undefined;
        expect(historyOf(list, keep)).toEqual(feed(keep ? list.filter(keep) : list));
      }),
      { numRuns: 3_000 },
    );
  });

  it("keeps a point exactly five minutes older than the newest, and drops one older still", () => {
    const list: Point[] = [
      [-1, 1_001],
      [0, 1_000],
      [300_000, 900],
    ];
    expect(historyOf(list)).toEqual(feed(list));
    expect(historyOf(list)).toEqual([
      [0, 1_000],
      [300_000, 900],
    ]);
  });

  it("keeps at most 8 points, the newest last", () => {
    const list: Point[] = Array.from({ length: 30 }, (_, i) => [i * 2_000, 1_000 - i]);
    expect(historyOf(list)).toEqual(list.slice(22));
  });
});

/** A report's time (the model reads times from 1970 on: its earlier points are no time). */
const T0 = Date.UTC(2026, 0, 1);

/** The time to exhaustion at the report's own time, burning `perS` (null: one report). */
const exhaustionEtaS = (remaining: number, perS: number | null, resetMs: number | null) =>
  windowNow(
    "requests",
    { limit: 1_000, remaining, reportedAt: T0, resetsAt: resetMs === null ? null : T0 + resetMs },
    perS === null
      ? [[T0, remaining]]
      : [
          [T0 - 10_000, remaining + 10 * perS],
          [T0, remaining],
        ],
    T0,
  ).exhaustion_eta_s;

describe("time to exhaustion", () => {
  it("remaining / burn when the limit runs out before the window resets", () => {
    expect(exhaustionEtaS(100, 10, 60_000)).toBe(10);
    expect(exhaustionEtaS(100, 3, null)).toBe(33.3);
  });

  it("null when the window resets first, or nothing is being used", () => {
    expect(exhaustionEtaS(100, 1, 50_000)).toBeNull();
    expect(exhaustionEtaS(100, 0, null)).toBeNull();
    expect(exhaustionEtaS(100, -2, null)).toBeNull();
    expect(exhaustionEtaS(100, null, null)).toBeNull();
  });

  it("0 when already exhausted", () => {
    expect(exhaustionEtaS(0, null, 1_000)).toBe(0);
    expect(exhaustionEtaS(-3, 5, 1_000)).toBe(0);
  });
});
