import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hotUpdates, MIN_GAP_MS, thinPoints } from "../../src/headroom/hot-series.js";
import { type ReportBody, toRecord, toRow } from "../../src/report/report-schema.js";
import { mergePointsReference, type Point, pointOrder } from "../helpers/hot-points-reference.js";

// A batch's points are thinned before they go to Redis: the merge must keep exactly what it would
// have kept of the whole list, whatever is stored already.

const T0 = Date.UTC(2030, 0, 1);

/** Points in bursts: some runs far under the gap, some just over it, some far apart. */
const points = fc.array(
  fc.tuple(
    fc.integer({ min: 0, max: 40 }),
    fc.constantFrom(1, 250, 999, 1_000, 1_001, 30_000),
    fc.integer({ min: 0, max: 20 }).map(String),
  ),
  { maxLength: 80 },
);
const timed = (steps: [number, number, string][]): Point[] =>
  steps.map(([n, scale, v]): Point => [T0 + n * scale, v]).sort(pointOrder);

describe("thinPoints", () => {
  it("changes nothing the merge keeps, for any stored points", () => {
    fc.assert(
      fc.property(points, points, (storedSteps, batchSteps) => {
        const stored = mergePointsReference([], timed(storedSteps));
        const batch = timed(batchSteps);
        if (batch.length === 0) return;
        expect(mergePointsReference(stored, thinPoints(batch))).toEqual(
          mergePointsReference(stored, batch),
        );
        expect(mergePointsReference([], thinPoints(batch))).toEqual(
          mergePointsReference([], batch),
        );
      }),
      { numRuns: 2_000 },
    );
  });

  it("sends a busy series' minute as a few points a second, not every report", () => {
    const minute = Array.from({ length: 20_000 }, (_, i): Point => [T0 + i * 3, String(i)]);
    const thinned = thinPoints(minute);
    expect(thinned.length).toBeLessThanOrEqual(2 * (60_000 / MIN_GAP_MS) + 2);
    expect(thinned[0]).toEqual(minute[0]);
    expect(thinned.at(-1)).toEqual(minute.at(-1));
  });

  it("is what a batch's rows give the store", () => {
    const rows = Array.from({ length: 5_000 }, (_, i) =>
      toRow(
        toRecord(
          {
            app: "a",
            provider: "openai",
            model: "m",
            timestamp: T0 + i * 10,
            limits: {
              requests_limit: 100,
              requests_remaining: 5_000 - i,
              tokens_limit: null,
              tokens_remaining: null,
              reset_requests_ms: null,
              reset_tokens_ms: null,
            },
            credits: null,
          } as ReportBody,
          { reportId: crypto.randomUUID(), projectId: "p", keyId: "k", receivedAt: T0 },
        ),
      ),
    );
    const series = [...(hotUpdates(rows).get("p")?.values() ?? [])][0];
    const sent = series?.p.requests ?? [];
    expect(sent.length).toBeLessThan(rows.length / 10);
    const all = rows.map((_, i): Point => [T0 + i * 10, String(5_000 - i)]);
    expect(mergePointsReference([], sent)).toEqual(mergePointsReference([], all));
  });
});
