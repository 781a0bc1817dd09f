import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  GROUP_COLUMNS,
  isJobData,
  jobData,
  jobRowCount,
  jobRows,
} from "../../src/queue/job-rows.js";
import type { ReportJobData } from "../../src/queue/reports-queue.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";
import {
  ROW_SHAPE_HISTORY,
  ROW_SHAPES,
  rowShapes,
  UnknownRowShapeError,
} from "../../src/report/row-shapes.js";

// A job's rows, flat (as every release before grouping wrote them) or grouped by the columns a
// batch's rows share: whatever form the edge picks, the worker reads the same rows.

const V1 = ROW_SHAPE_HISTORY[1] as readonly string[];
const CURRENT = ROW_SHAPES.current;
const SHARED = GROUP_COLUMNS.map((c) => REPORT_COLUMNS.indexOf(c));

/** A row of the current shape whose shared columns are `project`, `key`, `received`: shape 1's
 * columns, and null in those later shapes added. */
function row(id: string, project: string, key: string, received: string, n = 0): ReportRow {
  const r: ReportRow = [
    id,
    project,
    key,
    "app",
    "openai",
    n % 2 ? "gpt-4o" : null,
    "2026-11-20 10:00:00.000",
    received,
    n,
    n - 1,
    null,
    7,
    null,
    1_000,
    n % 3 ? "1.500000000000" : null,
    null,
    "0.000420000000",
    ...REPORT_COLUMNS.slice(V1.length).map(() => null),
  ];
  expect(r).toHaveLength(REPORT_COLUMNS.length);
  return r;
}

/** A request's rows: `n` rows sharing project, key and receive time. */
const batch = (n: number, project = "p1", key = "k1", received = "2026-11-20 10:00:01.000") =>
  Array.from({ length: n }, (_, i) =>
    row(`id-${project}-${received}-${i}`, project, key, received, i),
  );

/** A job as it travels: JSON written by the edge, parsed by the worker. */
const travel = (data: ReportJobData) => JSON.parse(JSON.stringify(data)) as ReportJobData;

describe("job rows", () => {
  it("groups a batch's rows: their shared columns once, each row without them", () => {
    const rows = batch(100);
    const data = travel(jobData(rows));
    expect(data.rows).toBeUndefined();
    expect(data.groups).toHaveLength(1);
    expect(data.groups?.[0]?.shared).toEqual(["p1", "k1", "2026-11-20 10:00:01.000"]);
    expect(data.groups?.[0]?.rows[0]).toHaveLength(REPORT_COLUMNS.length - GROUP_COLUMNS.length);
    // Each row is `"p1","k1","2026-11-20 10:00:01.000",` shorter; the group adds its keys.
    const flat = JSON.stringify({ v: CURRENT, rows }).length;
    expect(flat - JSON.stringify(data).length).toBeGreaterThanOrEqual(100 * 36 - 64);
    expect(jobRows(data)).toEqual(rows);
  });

  it("keeps single reports of different requests flat, as they were", () => {
    const rows = [
      ...batch(1, "p1"),
      ...batch(1, "p2"),
      ...batch(1, "p1", "k2"),
      ...batch(1, "p1", "k1", "2026-11-20 10:00:01.001"),
    ];
    const data = jobData(rows);
    expect(data).toEqual({ v: CURRENT, rows });
    expect(data.rows).toBe(rows);
  });

  it("reads a flat job an older edge queued", () => {
    const rows = batch(3);
    const shape1 = rows.map((r) => r.slice(0, V1.length));
    // Written by hand: the form of every job before grouping, in shape 1.
    const old = JSON.parse(`{"v":1,"rows":${JSON.stringify(shape1)}}`) as ReportJobData;
    expect(isJobData(old)).toBe(true);
    expect(jobRows(old)).toEqual(rows);
    // Releases before row versions wrote no `v`.
    expect(jobRows({ rows: shape1 } as unknown as ReportJobData)).toEqual(rows);
  });

  it("gives back any rows, in order, whichever form they travel in", () => {
    const groupOf = fc.record({
      project: fc.constantFrom("p1", "p2"),
      key: fc.constantFrom("k1", "k2"),
      received: fc.constantFrom("2026-11-20 10:00:01.000", "2026-11-20 10:00:01.001"),
      size: fc.integer({ min: 1, max: 6 }),
    });
    fc.assert(
      fc.property(fc.array(groupOf, { maxLength: 12 }), (groups) => {
        let n = 0;
        const rows = groups.flatMap((g) =>
          Array.from({ length: g.size }, () => row(`id-${n}`, g.project, g.key, g.received, n++)),
        );
        const data = travel(jobData(rows));
        expect(isJobData(data)).toBe(true);
        expect(jobRows(data)).toEqual(rows);
        expect(jobRowCount(data)).toBe(rows.length);
        // Grouped only when it saves: at least two rows a group on average.
        if (data.groups) expect(data.groups.length * 2).toBeLessThanOrEqual(rows.length);
      }),
    );
  });

  it("maps a grouped job of an older shape to the current one by column name", () => {
    const next = rowShapes({ ...ROW_SHAPE_HISTORY, [CURRENT + 1]: [...REPORT_COLUMNS, "region"] });
    const rows = batch(4);
    const data = travel(jobData(rows));
    expect(data.v).toBe(CURRENT);
    expect(jobRows(data, next)).toEqual(rows.map((r) => [...r, null]));
  });

  it("puts the shared values back where the job's shape has them", () => {
    const shapes = rowShapes({ 1: ["report_id", "received_at", "a", "project_id", "key_id", "b"] });
    const data: ReportJobData = {
      v: 1,
      groups: [{ shared: ["p1", "k1", "t1"], rows: [["id", "x", "y"]] }],
    };
    expect(jobRows(data, shapes)).toEqual([["id", "t1", "x", "p1", "k1", "y"]]);
  });

  it("refuses grouped rows of a shape newer than this release's", () => {
    const data: ReportJobData = {
      v: CURRENT + 1,
      groups: [{ shared: ["p", "k", "t"], rows: [["x"]] }],
    };
    expect(() => jobRows(data)).toThrow(UnknownRowShapeError);
  });

  it("does not pad a grouped row of the wrong length: ClickHouse refuses it whole", () => {
    const [good] = batch(1);
    const short = ["id-short", "app"];
    const data = travel(jobData([good as ReportRow, good as ReportRow]));
    data.groups?.[0]?.rows.push(short);
    const rows = jobRows(data);
    expect(rows[0]).toEqual(good);
    expect(rows[2]).toEqual(["p1", "k1", "2026-11-20 10:00:01.000", ...short]);
    expect(rows[2]).not.toHaveLength(REPORT_COLUMNS.length);
  });

  it("tells a job of ours from anything else", () => {
    expect(isJobData({ v: 1, rows: [] })).toBe(true);
    expect(isJobData({ v: 1, groups: [{ shared: ["p", "k", "t"], rows: [[]] }] })).toBe(true);
    for (const bad of [
      null,
      "rows",
      {},
      { v: 1, rows: [1] },
      { v: 1, groups: [{ shared: ["p", "k"], rows: [[]] }] },
      { v: 1, groups: [{ shared: ["p", "k", "t"], rows: [1] }] },
      { v: 1, groups: [null] },
      { v: 1, rows: [], groups: [] },
    ]) {
      expect(isJobData(bad)).toBe(false);
    }
  });

  it("puts the shared columns where the current shape has them", () => {
    expect(SHARED.every((i) => i >= 0)).toBe(true);
    const [r] = batch(1);
    const data = jobData([r as ReportRow, r as ReportRow]);
    expect(data.groups?.[0]?.shared).toEqual(SHARED.map((i) => r?.[i]));
  });
});
