import type { ReportRow } from "../report/report-schema.js";
import { ROW_SHAPES, type RowShapes } from "../report/row-shapes.js";
import type { ReportJobData, RowGroup } from "./reports-queue.js";

// A job's rows as they travel: flat (`rows`, each row whole), or grouped (`groups`) when a batch's
// rows share their project, key and receive time: those columns are written once per group and
// left out of each row, which makes the job's JSON about a quarter smaller and cheaper to write.
// Either way the rows are in shape `v` (row-shapes.ts); a worker reads both forms, so jobs that
// an older edge queued flat are read as they always were.

/** The columns a group's rows share, by name: found in every row shape. */
export const GROUP_COLUMNS = ["project_id", "key_id", "received_at"] as const;

/** Positions of the shared columns in a shape, and of the columns a grouped row keeps. */
function layout(columns: readonly string[]) {
  const shared = GROUP_COLUMNS.map((c) => columns.indexOf(c));
  if (shared.some((i) => i < 0)) throw new Error(`a row shape lacks one of ${GROUP_COLUMNS}`);
  const kept = columns.map((_, i) => i).filter((i) => !shared.includes(i));
  return { shared, kept };
}

/** Row → [kept columns] and row → [shared columns], as array literals (one shape per array). */
function compileSplit(columns: readonly string[]) {
  const { shared, kept } = layout(columns);
  const pick = (at: number[]) =>
    new Function("r", `return [${at.map((i) => `r[${i}]`).join(", ")}];`) as (
      row: ReportRow,
    ) => ReportRow;
  const [a, b, c] = shared as [number, number, number];
  const sameGroup = new Function(
    "r",
    "s",
    `return r[${a}] === s[${a}] && r[${b}] === s[${b}] && r[${c}] === s[${c}];`,
  ) as (row: ReportRow, other: ReportRow) => boolean;
  return { keep: pick(kept), share: pick(shared), sameGroup };
}

const split = compileSplit(ROW_SHAPES.columns);

/**
 * A job of these rows (in this release's shape): grouped when consecutive rows share their
 * group's columns, two rows a group or more on average (a batch's rows do; single reports of
 * different requests seldom do), flat otherwise.
 */
export function jobData(rows: ReportRow[]): ReportJobData {
  let groups = 0;
  for (let i = 0; i < rows.length; i++) {
    if (i === 0 || !split.sameGroup(rows[i] as ReportRow, rows[i - 1] as ReportRow)) groups++;
  }
  if (groups * 2 > rows.length) return { v: ROW_SHAPES.current, rows };
  const out: RowGroup[] = [];
  let group: RowGroup | undefined;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as ReportRow;
    if (group === undefined || !split.sameGroup(row, rows[i - 1] as ReportRow)) {
      group = { shared: split.share(row), rows: [] };
      out.push(group);
    }
    group.rows.push(split.keep(row));
  }
  return { v: ROW_SHAPES.current, groups: out };
}

/** Whether a job's data is rows in either form (anything else is no job of ours). */
export function isJobData(data: unknown): data is ReportJobData {
  if (data === null || typeof data !== "object") return false;
  const d = data as { rows?: unknown; groups?: unknown };
  if (d.groups === undefined) return isRows(d.rows);
  return (
    d.rows === undefined &&
    Array.isArray(d.groups) &&
    d.groups.every(
      (g: { shared?: unknown; rows?: unknown } | null) =>
        g !== null &&
        typeof g === "object" &&
        Array.isArray(g.shared) &&
        g.shared.length === GROUP_COLUMNS.length &&
        isRows(g.rows),
    )
  );
}

/** How many rows a job holds, in either form, without reading them (any shape). */
export const jobRowCount = (data: ReportJobData): number =>
  data.groups === undefined
    ? (data.rows?.length ?? 0)
    : data.groups.reduce((n, g) => n + g.rows.length, 0);

const isRows = (rows: unknown) => Array.isArray(rows) && rows.every(Array.isArray);

/** A shape's grouped rows → its whole rows, in order; compiled once per shape. */
const ungroupers = new WeakMap<
  RowShapes,
  Map<number, (group: RowGroup, out: ReportRow[]) => void>
>();
function ungrouper(shapes: RowShapes, version: number) {
  let byVersion = ungroupers.get(shapes);
  if (!byVersion) {
    byVersion = new Map();
    ungroupers.set(shapes, byVersion);
  }
  let ungroup = byVersion.get(version);
  if (ungroup) return ungroup;
  const columns = shapes.columnsOf(version);
  const { shared, kept } = layout(columns);
  // Where each column of the whole row comes from: the group's shared values or the row's own.
  const from = columns.map((_, i) =>
    shared.includes(i) ? `s[${shared.indexOf(i)}]` : `r[${kept.indexOf(i)}]`,
  );
  const whole = new Function("s", "r", `return [${from.join(", ")}];`) as (
    s: ReportRow,
    r: ReportRow,
  ) => ReportRow;
  // A row of another length is not guessed at: kept whole after the shared values, it has too
  // many or too few columns, so ClickHouse refuses it and it waits in the dead-letter set.
  ungroup = (group, out) => {
    for (const r of group.rows)
      out.push(r.length === kept.length ? whole(group.shared, r) : [...group.shared, ...r]);
  };
  byVersion.set(version, ungroup);
  return ungroup;
}

/**
 * A job's rows, whole and in the current shape: a flat job's rows as they are (mapped from an
 * older shape), a grouped job's rows with their group's columns put back. A shape newer than this
 * release's throws UnknownRowShapeError.
 */
export function jobRows(data: ReportJobData, shapes: RowShapes = ROW_SHAPES): ReportRow[] {
  if (data.groups === undefined) return shapes.upgrade(data.v, data.rows);
  const ungroup = ungrouper(shapes, data.v ?? 1);
  const rows: ReportRow[] = [];
  for (const group of data.groups) ungroup(group, rows);
  return shapes.upgrade(data.v, rows);
}
