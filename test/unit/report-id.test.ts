import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { newReportId, newReportIds } from "../../src/report/report-id.js";

// Report ids: RFC 9562 UUIDv7 strings, stamped with the given ms, distinct.

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The Unix ms in an id's first 48 bits. */
const msOf = (id: string) => Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

describe("report ids", () => {
  it("are UUIDv7 stamped with the batch's ms, for any ms and count", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 48 - 1 }),
        fc.integer({ min: 1, max: 300 }),
        (ms, count) => {
          const ids = newReportIds(count, ms);
          expect(ids).toHaveLength(count);
          for (const id of ids) {
            expect(id).toMatch(V7);
            expect(msOf(id)).toBe(ms);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("are distinct across batches and the random pool's refills", () => {
    const seen = new Set<string>();
    const ms = Date.now();
    for (let batch = 0; batch < 30; batch++) for (const id of newReportIds(100, ms)) seen.add(id);
    for (let i = 0; i < 1_000; i++) seen.add(newReportId());
    expect(seen.size).toBe(4_000);
  });

  it("sort by time: a later ms sorts after", () => {
    const [a] = newReportIds(1, 1_700_000_000_000);
    const [b] = newReportIds(1, 1_700_000_000_001);
    expect((a as string) < (b as string)).toBe(true);
  });

  it("uses every random digit: no position is constant over many ids", () => {
    const ids = newReportIds(2_000, 0);
    for (const at of [15, 16, 17, 20, 21, 22, 24, 35]) {
      expect(new Set(ids.map((id) => id[at])).size, `position ${at}`).toBeGreaterThan(3);
    }
    // The variant's digit has exactly two high bits fixed: 8, 9, a, b.
    expect([...new Set(ids.map((id) => id[19]))].sort()).toEqual(["8", "9", "a", "b"]);
  });

  it("newReportId is stamped with the current time", () => {
    const before = Date.now();
    const id = newReportId();
    expect(id).toMatch(V7);
    expect(msOf(id)).toBeGreaterThanOrEqual(before);
    expect(msOf(id)).toBeLessThanOrEqual(Date.now());
  });
});
