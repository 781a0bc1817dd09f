import { describe, expect, it } from "vitest";
import {
  addPoint,
  burnPerSecond,
  HISTORY_WINDOW_MS,
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
