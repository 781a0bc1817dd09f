import { type WindowRecord, windowsOfRecord } from "../providers/derive-windows.js";
import type { DerivedWindows } from "../providers/window.js";
import type { ReportRow } from "../report/report-schema.js";

// A report's windows as `reports` stores them (migration 7): parallel arrays of the Nested
// `windows`, and the parser that made them. The worker derives them from each row as it inserts
// (report-sink.ts), so a parser fix reaches every report stored after it; `headroom
// rederive-windows` applies a newer parser to reports stored before (rederive.ts).

/** The windows columns, in the order windowCells gives them. */
export const WINDOW_COLUMNS = [
  "`windows.dimension`",
  "`windows.window`",
  "`windows.limit`",
  "`windows.remaining`",
  "`windows.resets_at`",
  "windows_parser",
] as const;

export type WindowCells = [
  dimension: string[],
  window: (string | null)[],
  limit: (number | null)[],
  remaining: (number | null)[],
  resetsAt: (string | null)[],
  parser: string,
];

export type Derive = (record: WindowRecord) => DerivedWindows;

/** DateTime64(3)'s range: a reset outside it is no time ClickHouse can hold, so it is unknown. */
const MIN_TIME_MS = Date.UTC(1900, 0, 1);
const MAX_TIME_MS = Date.UTC(2299, 11, 31);

/** A number ClickHouse's Float64 takes from JSON (NaN and ±Infinity are not JSON): else null. */
const finite = (n: number | null): number | null => (n !== null && Number.isFinite(n) ? n : null);

function timeText(ms: number | null): string | null {
  if (ms === null || !Number.isFinite(ms) || ms < MIN_TIME_MS || ms > MAX_TIME_MS) return null;
  const iso = new Date(Math.round(ms)).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}

/** Derived windows → the columns' values. */
export function cellsOf(derived: DerivedWindows): WindowCells {
  const w = derived.windows;
  return [
    w.map((x) => x.dimension),
    w.map((x) => x.window),
    w.map((x) => finite(x.limit)),
    w.map((x) => finite(x.remaining)),
    w.map((x) => timeText(x.resets_at)),
    derived.parser,
  ];
}

const CLICKHOUSE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$/;
const isoOf = (text: string) =>
  CLICKHOUSE_TIME.test(text) ? `${text.slice(0, 10)}T${text.slice(11, 23)}Z` : text;

const numberOrNull = (v: unknown): number | null => (v == null ? null : Number(v));
const textOrNull = (v: unknown): string | null => (typeof v === "string" ? v : null);

/**
 * The windows of rows in `columns` (any row shape: a column a shape lacks reads as null, so rows
 * of shape 1 get the legacy windows). A parser that throws costs the row its windows, never the
 * batch: it is stored with none, and its parser named `failed` (`headroom rederive-windows` can try again).
 */
export function windowCellsOf(
  columns: readonly string[],
  derive: Derive = windowsOfRecord,
): (row: ReportRow) => WindowCells {
  const at = (c: string) => columns.indexOf(c);
  const i = {
    provider: at("provider"),
    timestamp: at("timestamp"),
    requests_limit: at("requests_limit"),
    requests_remaining: at("requests_remaining"),
    tokens_limit: at("tokens_limit"),
    tokens_remaining: at("tokens_remaining"),
    reset_requests_ms: at("reset_requests_ms"),
    reset_tokens_ms: at("reset_tokens_ms"),
    credits_limit: at("credits_limit"),
    credits_remaining: at("credits_remaining"),
    headers: at("headers"),
    error: at("error"),
  };
  const cell = (row: ReportRow, index: number) => (index < 0 ? null : (row[index] ?? null));
  return (row) => {
    const record: WindowRecord = {
      provider: String(cell(row, i.provider) ?? ""),
      timestamp: isoOf(String(cell(row, i.timestamp) ?? "")),
      requests_limit: numberOrNull(cell(row, i.requests_limit)),
      requests_remaining: numberOrNull(cell(row, i.requests_remaining)),
      tokens_limit: numberOrNull(cell(row, i.tokens_limit)),
      tokens_remaining: numberOrNull(cell(row, i.tokens_remaining)),
      reset_requests_ms: numberOrNull(cell(row, i.reset_requests_ms)),
      reset_tokens_ms: numberOrNull(cell(row, i.reset_tokens_ms)),
      credits_limit: numberOrNull(cell(row, i.credits_limit)),
      credits_remaining: numberOrNull(cell(row, i.credits_remaining)),
      headers: textOrNull(cell(row, i.headers)),
      error: textOrNull(cell(row, i.error)),
    };
    try {
      return cellsOf(derive(record));
    } catch {
      return [[], [], [], [], [], "failed"];
    }
  };
}
