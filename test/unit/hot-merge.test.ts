import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mergeHotSeries, mergePoints } from "../../src/headroom/hot-merge.js";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import { mergePointsReference, type Point, pointOrder } from "../helpers/hot-points-reference.js";

// The hot copy's merge (src/headroom/hot-merge.ts): batches merged in any order, or again, give
// the same figures; points are what one sort of the stored and the batch's gives; a stored copy
// that is not a series is replaced, never merged into.

const T0 = Date.UTC(2030, 0, 1);

const point = fc.tuple(
  fc.integer({ min: 0, max: 600_000 }).map((t) => T0 + t - (t % 250)),
  fc.integer({ min: 0, max: 30 }).map(String),
);
const at = fc.integer({ min: 0, max: 600_000 }).map((t) => T0 + t);

/** One batch's figures for a series: its newest report's, with a few points and windows. */
const batch: fc.Arbitrary<HotSeries> = fc
  .record({
    t: at,
    remaining: fc.integer({ min: 0, max: 100 }).map(String),
    points: fc.array(point, { minLength: 1, maxLength: 6 }),
    window: fc.constantFrom("requests@1m", "tokens@1m", "requests@1d"),
    pool: fc.constantFrom("", "a:org-1", "l:team"),
  })
  .map(({ t, remaining, points, window, pool }) => {
    // A report id names one report: the same id, the same figures.
    const id = `${t}-${remaining}-${window}-${pool}`;
    const ps = [...points].sort((x, y) => x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0));
    const ls = Math.max(t, ...ps.map(([p]) => p));
    return {
      ls,
      la: t,
      li: id,
      l: ["100", remaining, null, null, "60000", null],
      p: { requests: ps },
      w: { [window]: [t, id, "100", remaining, t + 60_000] },
      wp: { [window]: ps },
      g: [t, id, pool, "key-1"],
      o: t,
    } satisfies HotSeries;
  });

const mergeAll = (batches: HotSeries[]) =>
  batches.reduce<HotSeries | null>(
    (copy, b) => mergeHotSeries(copy, structuredClone(b), T0 + 600_000, false),
    null,
  );

describe("hot copy merge", () => {
  it("gives the same figures whatever order the batches come in, and a batch again changes nothing", () => {
    // Points are left out: a point the window cut no longer anchors the thinning of a later
    // batch's, so which of the points under a second apart stays can depend on the order, or
    // on a batch merged again (as it did in the Lua merge this one replaced).
    const figures = (s: HotSeries | null) => ({ ...s, p: undefined, wp: undefined });
    fc.assert(
      fc.property(
        fc
          .array(batch, { minLength: 1, maxLength: 6 })
          .chain((bs) =>
            fc.tuple(fc.constant(bs), fc.shuffledSubarray(bs, { minLength: bs.length })),
          ),
        fc.nat(),
        ([batches, shuffled], again) => {
          const inOrder = mergeAll(batches);
          expect(figures(mergeAll(shuffled))).toEqual(figures(inOrder));
          const repeated = [...batches, batches[again % batches.length] as HotSeries];
          expect(figures(mergeAll(repeated))).toEqual(figures(inOrder));
        },
      ),
    );
  });

  it("keeps what one sort of the points' union keeps: at most 16, within 5 minutes of the newest", () => {
    fc.assert(
      fc.property(
        fc.array(point, { maxLength: 40 }),
        fc.array(point, { minLength: 1, maxLength: 40 }),
        (stored, incoming) => {
          const kept = mergePoints(stored as Point[], incoming as Point[]);
          expect(kept).toEqual(mergePointsReference(stored as Point[], incoming as Point[]));
          // Apart from the reference (the same rule, written alike): the newest point of all is
          // kept; every kept point is one given, in order, none twice; after the first two, a
          // second apart at least; at most 16, within 5 minutes of the newest.
          const all = [...stored, ...incoming] as Point[];
          const newestOfAll = all.reduce((a, b) => (pointOrder(a, b) >= 0 ? a : b));
          expect(kept.at(-1)).toEqual(newestOfAll);
          const given = new Set(all.map((x) => JSON.stringify(x)));
          expect(kept.every((x) => given.has(JSON.stringify(x)))).toBe(true);
          for (let i = 1; i < kept.length; i++) {
            expect(pointOrder(kept[i - 1] as Point, kept[i] as Point)).toBeLessThan(0);
            if (i >= 2) {
              expect((kept[i] as Point)[0] - (kept[i - 1] as Point)[0]).toBeGreaterThanOrEqual(
                1_000,
              );
            }
          }
          expect(kept.length).toBeLessThanOrEqual(16);
          const newest = kept.at(-1)?.[0] ?? 0;
          expect(kept.every(([t]) => t >= newest - 5 * 60_000)).toBe(true);
        },
      ),
    );
  });

  it("replaces a stored copy that is not a series instead of merging into it", () => {
    const b = fc.sample(batch, { numRuns: 1, seed: 1 })[0] as HotSeries;
    for (const stored of [null, 1, "x", [], { ls: "x", p: 5 }, { p: {} }]) {
      expect(mergeHotSeries(stored, structuredClone(b), T0, false)).toEqual(
        mergeHotSeries(null, structuredClone(b), T0, false),
      );
    }
  });
});
