import type { ReportRow } from "./report-schema.js";

// Jobs and manifests carry reports as positional rows, and say which shape they are in (`v`).
// A release that adds a report field adds a shape here (and a migration that adds its column);
// it never edits a shape that was released: jobs queued by the previous release's edges, and
// manifests recorded by its workers, are read by their version and mapped to the current shape
// by column name (a column an old shape lacks is null: ClickHouse stores its default).

export type RowShapeHistory = Readonly<Record<number, readonly string[]>>;

/** The first released row shape: the report's fields as stored. */
const SHAPE_1 = [
  "report_id",
  "project_id",
  "key_id",
  "app",
  "provider",
  "model",
  "timestamp",
  "received_at",
  "requests_limit",
  "requests_remaining",
  "tokens_limit",
  "tokens_remaining",
  "reset_requests_ms",
  "reset_tokens_ms",
  "credits_limit",
  "credits_remaining",
  "request_cost",
] as const;

/** Every released row shape, by version. The last is the one REPORT_COLUMNS gives today. */
export const ROW_SHAPE_HISTORY: RowShapeHistory = {
  1: SHAPE_1,
  // Issue 34: what the provider said (kept rate-limit headers, error body), compact JSON or null.
  2: [...SHAPE_1, "headers", "error"],
  // Issue 44: the pool a report draws on: the account's keyed hash, the client's label.
  3: [...SHAPE_1, "headers", "error", "account", "pool"],
  // Issue 45: what the call used (`usage`), for the windows counted against a limit.
  4: [
    ...SHAPE_1,
    "headers",
    "error",
    "account",
    "pool",
    "usage_input_tokens",
    "usage_output_tokens",
    "usage_cached_tokens",
  ],
};

/** A job or manifest in a shape this worker does not know: written by a newer release. */
export class UnknownRowShapeError extends Error {
  override name = "UnknownRowShapeError";
}

export interface RowShapes {
  /** The version this release writes. */
  current: number;
  /** The columns of the current shape, in order: the insert's column list. */
  columns: readonly string[];
  /** The columns of shape `version`, in order. */
  columnsOf(version: number): readonly string[];
  /** Rows of shape `version` (1 when a payload names none) in the current shape. */
  upgrade(version: number | undefined, rows: ReportRow[]): ReportRow[];
}

export function rowShapes(history: RowShapeHistory): RowShapes {
  const current = Math.max(...Object.keys(history).map(Number));
  const columns = history[current] as readonly string[];
  const mappers = new Map<number, (row: ReportRow) => ReportRow>();
  for (const [version, old] of Object.entries(history)) {
    const from = columns.map((c) => old.indexOf(c));
    mappers.set(Number(version), (row) => from.map((i) => (i < 0 ? null : (row[i] ?? null))));
  }
  const unknown = (version: number) =>
    new UnknownRowShapeError(
      `rows of shape v${version}; this release knows v1 to v${current}: upgrade this worker`,
    );
  return {
    current,
    columns,
    columnsOf(version) {
      const of = history[version];
      if (!of) throw unknown(version);
      return of;
    },
    upgrade(version = 1, rows) {
      if (version === current) return rows;
      const map = mappers.get(version);
      if (!map) throw unknown(version);
      return rows.map(map);
    },
  };
}

/** This release's shapes. The current one must list REPORT_COLUMNS (test/unit/row-shapes.test.ts). */
export const ROW_SHAPES = rowShapes(ROW_SHAPE_HISTORY);
