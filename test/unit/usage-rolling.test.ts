import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  answerJson,
  changedBuckets,
  mergeRecent,
  sameRecent,
  type UsageEntry,
} from "../../src/api/usage-rolling.js";

// A /usage answer refreshed by its newest buckets and the older ones whose count of reports moved
// must equal the answer read whole, wherever and in whatever order the reports since the last
// refresh fell (late, back-dated, in the future); and its JSON, built from the points'
// kept JSON, must be JSON.stringify of the answer. The oracle is a plain aggregate-and-sort of
// every report, as ClickHouse's GROUP BY … ORDER BY gives it.

const W = 60_000;

interface Report {
  group: [string, string, string];
  ms: number;
}

interface Point {
  bucket: string;
  provider: string;
  model: string | null;
  reports: number;
}

const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** The answer read whole over [from, to): one entry per group and bucket, ClickHouse's order. */
function whole(reports: Report[], from: number, to: number): (UsageEntry & { point: Point })[] {
  const cells = new Map<string, { group: Report["group"]; ms: number; n: number }>();
  for (const r of reports) {
    if (r.ms < from || r.ms >= to) continue;
    const ms = Math.floor(r.ms / W) * W;
    const key = JSON.stringify([r.group, ms]);
    const cell = cells.get(key) ?? { group: r.group, ms, n: 0 };
    cell.n++;
    cells.set(key, cell);
  }
  return [...cells.values()]
    .sort(
      (a, b) =>
        byBytes(a.group[0], b.group[0]) ||
        byBytes(a.group[1], b.group[1]) ||
        byBytes(a.group[2], b.group[2]) ||
        a.ms - b.ms,
    )
    .map((c) => {
      const point = {
        bucket: new Date(c.ms).toISOString(),
        provider: c.group[0],
        model: c.group[1] === "" ? null : c.group[1],
        reports: c.n,
      };
      return {
        ms: c.ms,
        group: JSON.stringify(c.group),
        point,
        json: JSON.stringify(point),
        reports: c.n,
      };
    });
}

// Names whose UTF-16 order differs from their UTF-8 byte order (U+FF5E vs U+1F600) included.
const name = fc.constantFrom("", "a", "b", "B", "openai", "é", "\uff5e", "\u{1f600}", "a b");
const group = fc.tuple(name, name, name);

describe("mergeRecent", () => {
  it("equals the whole answer when new reports are in the recent buckets", () => {
    // Reports stored before t0 may lie after its range (timestamps up to 24 h ahead are taken).
    const base = 1_800_000_000_000;
    const span = 120 * W;
    fc.assert(
      fc.property(
        fc.array(fc.record({ group, at: fc.integer({ min: 0, max: span + 30 * W }) }), {
          maxLength: 200,
        }),
        // Up to past the whole span: a previous answer can be hours old (expired, not dropped).
        fc.integer({ min: 0, max: 200 * W }),
        fc.integer({ min: 0, max: 10 }),
        fc.array(fc.record({ group, late: fc.integer({ min: 0, max: 12 * W }) }), {
          maxLength: 60,
        }),
        (before, step, recentMinutes, later) => {
          const t0 = base + span;
          const t1 = t0 + step;
          const old: Report[] = before.map((r) => ({ group: r.group, ms: base + r.at - 30 * W }));
          const from0 = Math.floor((t0 - span) / W) * W;
          const to0 = Math.ceil(t0 / W) * W;
          const previous = whole(old, from0, to0);
          const from1 = Math.floor((t1 - span) / W) * W;
          const to1 = Math.ceil(t1 / W) * W;
          // As usage.ts: never after the previous answer's end, or the buckets between are lost.
          const recentFrom = Math.max(
            from1,
            Math.min(Math.floor((t1 - recentMinutes * W) / W) * W, to0),
          );
          // Reports since t0, all timestamped in the recent buckets [recentFrom, to1).
          const added: Report[] = later.map((r) => ({
            group: r.group,
            ms: recentFrom + (r.late % Math.max(1, to1 - recentFrom)),
          }));
          const all = [...old, ...added];
          const merged = mergeRecent(previous, whole(all, recentFrom, to1), from1, recentFrom);
          expect(merged.map((e) => JSON.parse(e.json))).toEqual(
            whole(all, from1, to1).map((e) => e.point),
          );
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it("equals the whole answer with late and back-dated reports, their buckets found by counts", () => {
    const base = 1_800_000_000_000;
    const span = 120 * W;
    const t0 = base + span;
    fc.assert(
      fc.property(
        fc.array(fc.record({ group, at: fc.integer({ min: -30 * W, max: span + 30 * W }) }), {
          maxLength: 200,
        }),
        fc.integer({ min: 0, max: 200 * W }),
        fc.integer({ min: 0, max: 10 }),
        // Reports stored since t0, in any order, timestamped anywhere from before the old
        // range to a day ahead of the new one: late, back-dated, out of order.
        fc.array(
          fc.record({ group, at: fc.integer({ min: -60 * W, max: span + 300 * W + 24 * 60 * W }) }),
          { maxLength: 80 },
        ),
        (before, step, recentMinutes, later) => {
          const t1 = t0 + step;
          const old: Report[] = before.map((r) => ({ group: r.group, ms: base + r.at }));
          const from0 = Math.floor((t0 - span) / W) * W;
          const to0 = Math.ceil(t0 / W) * W;
          const previous = whole(old, from0, to0);
          const from1 = Math.floor((t1 - span) / W) * W;
          const to1 = Math.ceil(t1 / W) * W;
          const recentFrom = Math.max(
            from1,
            Math.min(Math.floor((t1 - recentMinutes * W) / W) * W, to0),
          );
          const all = [...old, ...later.map((r) => ({ group: r.group, ms: base + r.at }))];
          // What ClickHouse counts per bucket over every group, as bucketCountsSql does.
          const counts = new Map<number, number>();
          for (const e of whole(all, from1, recentFrom)) {
            counts.set(e.ms, (counts.get(e.ms) ?? 0) + e.reports);
          }
          const changed = changedBuckets(previous, counts, from1, recentFrom);
          const read = new Set(changed);
          const fresh = whole(all, from1, to1).filter((e) => e.ms >= recentFrom || read.has(e.ms));
          const merged = mergeRecent(previous, fresh, from1, recentFrom, read);
          expect(merged.map((e) => JSON.parse(e.json))).toEqual(
            whole(all, from1, to1).map((e) => e.point),
          );
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it("keeps nothing of the previous answer at or after recentFrom, nor before from", () => {
    const e = (ms: number, g = '["a","",""]') => ({
      ms,
      group: g,
      point: ms,
      json: String(ms),
      reports: 1,
    });
    const merged = mergeRecent([e(0), e(W), e(2 * W), e(3 * W)], [e(2 * W)], W, 2 * W);
    expect(merged.map((x) => x.ms)).toEqual([W, 2 * W]);
  });
});

describe("changedBuckets", () => {
  const e = (ms: number, reports: number, g = '["a","",""]') => ({
    ms,
    group: g,
    json: "",
    reports,
  });
  it("names the buckets before recentFrom whose count moved, appeared or went", () => {
    const kept = [e(0, 1), e(W, 2), e(W, 3, '["b","",""]'), e(2 * W, 1), e(3 * W, 1), e(5 * W, 1)];
    const counts = new Map([
      [0, 1],
      [W, 6],
      [4 * W, 1],
      [5 * W, 9],
    ]);
    expect(changedBuckets(kept, counts, 0, 5 * W)).toEqual([W, 2 * W, 3 * W, 4 * W]);
    expect(changedBuckets(kept, new Map([[W, 5]]), W, 2 * W)).toEqual([]);
  });
});

describe("answerJson", () => {
  it("is JSON.stringify of the answer", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 5 }),
        fc.array(fc.jsonValue(), { maxLength: 20 }),
        (head, points) => {
          const entries = points.map((point) => ({ json: JSON.stringify(point) }));
          const { points: _, ...rest } = head;
          expect(answerJson(rest, entries)).toBe(JSON.stringify({ ...rest, points }));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("sameRecent", () => {
  const e = (ms: number, json = String(ms), group = '["a","",""]') => ({
    ms,
    group,
    point: 0,
    json,
    reports: 1,
  });
  it("is true only when the kept entries from recentFrom on are the fresh ones", () => {
    const kept = [e(0), e(W), e(2 * W), e(W, "1", '["b","",""]')];
    expect(sameRecent(kept, [e(2 * W)], 2 * W)).toBe(true);
    expect(sameRecent(kept, [e(2 * W, "x")], 2 * W)).toBe(false);
    expect(sameRecent(kept, [e(W), e(2 * W), e(W, "1", '["b","",""]')], W)).toBe(true);
    expect(sameRecent(kept, [e(W), e(2 * W), e(W, "9", '["b","",""]')], W)).toBe(false);
    expect(sameRecent(kept, [e(W), e(2 * W)], W)).toBe(false);
    expect(sameRecent(kept, [e(W), e(2 * W), e(W, "1", '["c","",""]')], W)).toBe(false);
    expect(sameRecent([e(0)], [], W)).toBe(true);
  });
});
