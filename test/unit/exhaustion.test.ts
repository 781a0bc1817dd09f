import { describe, expect, it } from "vitest";
import { type MarkedWindow, withPoolMark } from "../../src/headroom/exhaustion.js";

// A pool-wide rate limit on a series' windows at the answer's moment: every window at 0 from
// the limit's report until its retry delay, else the window's own reset, else a later report
// that was not limited; a pool without windows shows its requests used up.

const T = Date.UTC(2030, 0, 2, 12);
const w = (over: Partial<MarkedWindow> = {}): MarkedWindow => ({
  dimension: "requests",
  window: "1m",
  source: "declared",
  limit: 60,
  remaining: 40,
  reportedAt: T - 10_000,
  resetsAt: T + 50_000,
  points: [[T - 10_000, 40]],
  ...over,
});
const mark = (until: number | null) => ({ at: T, reportId: "r", until });

describe("a pool-wide rate limit", () => {
  it("puts every window at 0 until the retry delay, then leaves it as it was", () => {
    const windows = [w(), w({ dimension: "tokens", limit: 1000, remaining: 900 })];
    const during = withPoolMark(windows, mark(T + 5_000), null, T + 1_000);
    expect(during.map((x) => [x.remaining, x.reportedAt, x.resetsAt, x.source])).toEqual([
      [0, T, T + 5_000, "declared"],
      [0, T, T + 5_000, "declared"],
    ]);
    expect(withPoolMark(windows, mark(T + 5_000), null, T + 5_000)).toEqual(windows);
  });

  it("without a retry delay, lasts until each window's reset, else until a report that was not limited", () => {
    const windows = [w(), w({ window: "1d", resetsAt: null })];
    const during = withPoolMark(windows, mark(null), null, T + 60_000);
    // The minute's reset has passed; the day states none: still used up.
    expect(during.map((x) => x.remaining)).toEqual([40, 0]);
    expect(withPoolMark(windows, mark(null), T + 1, T + 60_000)).toEqual(windows);
    expect(withPoolMark(windows, mark(null), T, T + 60_000)).not.toEqual(windows);
  });

  it("keeps a window whose figures are newer than the mark", () => {
    const newer = w({ reportedAt: T + 1, remaining: 7 });
    expect(withPoolMark([newer], mark(null), null, T + 2)).toEqual([newer]);
  });

  it("shows a pool without windows as its requests used up, of unknown length", () => {
    expect(withPoolMark([], mark(T + 9_000), null, T + 1)).toEqual([
      {
        dimension: "requests",
        window: null,
        source: "stated",
        limit: null,
        remaining: 0,
        reportedAt: T,
        resetsAt: T + 9_000,
        points: [],
      },
    ]);
    expect(withPoolMark([], mark(T + 9_000), null, T + 9_000)).toEqual([]);
    expect(withPoolMark([], undefined, null, T)).toEqual([]);
  });
});
