import { describe, expect, it } from "vitest";
import { perReport, viewsFigures } from "../../bench/views-figures.js";

const sample = (rows: number, engineUs: number, processUs = engineUs) => ({
  rows,
  engineUs,
  processUs,
});

describe("the views' figures", () => {
  it("takes each database's median CPU per report over its samples", () => {
    // 10, 12 and 40 µs a report: one slow stretch moves the median not at all.
    expect(perReport([sample(100, 1_000), sample(100, 4_000), sample(200, 2_400)])).toEqual({
      engineUs: 12,
      processUs: 12,
    });
    expect(perReport([sample(100, 1_000), sample(100, 3_000)]).engineUs).toBe(20);
    // A stretch with no rows says nothing.
    expect(perReport([sample(0, 500), sample(10, 100)]).engineUs).toBe(10);
  });

  it("divides every view by reports alone, and ranks each view's increment over reports alone", () => {
    const f = viewsFigures({
      all: [sample(1_000, 18_000, 24_000)],
      reportsAlone: [sample(1_000, 9_000, 12_000)],
      alone: {
        small_mv: [sample(1_000, 10_000, 13_000)],
        big_mv: [sample(1_000, 15_000, 18_000)],
      },
    });
    expect(f.all).toEqual({ engineUs: 18, processUs: 24 });
    expect(f.ratio).toEqual({ engineUs: 2, processUs: 2 });
    expect(f.views).toEqual([
      { view: "big_mv", engineUs: 6, processUs: 6, share: 6 / 9 },
      { view: "small_mv", engineUs: 1, processUs: 1, share: 1 / 9 },
    ]);
    expect(f.merges).toBeNull();
  });

  it("compares each view with reports alone within each round, then takes the median", () => {
    // Rounds at 10, 30 and 20 µs a report: the view costs 1 µs more in two of them.
    const f = viewsFigures({
      all: [sample(1, 12), sample(1, 32), sample(1, 22)],
      reportsAlone: [sample(1, 10), sample(1, 30), sample(1, 20)],
      alone: { view_mv: [sample(1, 11), sample(1, 31), sample(1, 25)] },
    });
    expect(f.views[0]?.engineUs).toBe(1);
  });

  it("gives the merges per report inserted when they were measured", () => {
    const f = viewsFigures({
      all: [sample(10, 100)],
      reportsAlone: [sample(10, 50)],
      alone: {},
      merges: { all: sample(1_000, 3_000), reportsAlone: sample(1_000, 2_000) },
    });
    expect(f.merges).toEqual({
      all: { engineUs: 3, processUs: 3 },
      reportsAlone: { engineUs: 2, processUs: 2 },
    });
  });
});
