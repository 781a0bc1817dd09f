import { type WindowRecord, windowsOfRecord } from "../providers/derive-windows.js";
import type { DerivedWindows, Window, WindowLength } from "../providers/window.js";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "../report/report-schema.js";

// A stored row's windows (src/providers/window.ts), as every reader of rows derives them: the hot
// headroom (src/headroom/hot-series.ts) and the alerts (usage.ts). The derivation is injectable
// (`DeriveWindows`), so that a test can give a row a window set the running parsers do not make
// yet; everything else is the real path.

export type DeriveWindows = (record: WindowRecord) => DerivedWindows;

const at = (c: string) => REPORT_COLUMNS.indexOf(c as ReportColumn);
const I = {
  provider: at("provider"),
  timestamp: at("timestamp"),
  requestsLimit: at("requests_limit"),
  requestsRemaining: at("requests_remaining"),
  tokensLimit: at("tokens_limit"),
  tokensRemaining: at("tokens_remaining"),
  resetRequests: at("reset_requests_ms"),
  resetTokens: at("reset_tokens_ms"),
  creditsLimit: at("credits_limit"),
  creditsRemaining: at("credits_remaining"),
  // Issue 34 part B adds these columns; until then they are -1 and read as absent.
  headers: at("headers"),
  error: at("error"),
};

const num = (row: ReportRow, i: number) => {
  const v = i < 0 ? null : row[i];
  return v === null || v === undefined || v === "" ? null : Number(v);
};
const textOf = (row: ReportRow, i: number) => {
  const v = i < 0 ? null : row[i];
  return v === null || v === undefined ? null : String(v);
};

/** A row's timestamp text (ClickHouse DateTime64(3), UTC) as ISO 8601. */
const isoOf = (text: string) => `${text.replace(" ", "T")}${text.endsWith("Z") ? "" : "Z"}`;

/** The fields of a row that windows are derived from. */
export function windowRecordOf(row: ReportRow): WindowRecord {
  return {
    provider: String(row[I.provider]),
    timestamp: isoOf(String(row[I.timestamp])),
    requests_limit: num(row, I.requestsLimit),
    requests_remaining: num(row, I.requestsRemaining),
    tokens_limit: num(row, I.tokensLimit),
    tokens_remaining: num(row, I.tokensRemaining),
    reset_requests_ms: num(row, I.resetRequests),
    reset_tokens_ms: num(row, I.resetTokens),
    credits_limit: num(row, I.creditsLimit),
    credits_remaining: num(row, I.creditsRemaining),
    headers: textOf(row, I.headers),
    error: textOf(row, I.error),
  };
}

/** A row's windows through `derive` (windowsOfRecord unless a test gives its own). */
export function windowsOfRow(row: ReportRow, derive: DeriveWindows = windowsOfRecord): Window[] {
  return derive(windowRecordOf(row)).windows;
}

/** A window's key within its series: its dimension and length ('' when unknown). */
export const windowKey = (w: { dimension: string; window: WindowLength | null }) =>
  `${w.dimension}@${w.window ?? ""}`;

/** windowKey's inverse. */
export function parseWindowKey(key: string): { dimension: string; window: WindowLength | null } {
  const i = key.lastIndexOf("@");
  const length = key.slice(i + 1);
  return { dimension: key.slice(0, i), window: length === "" ? null : (length as WindowLength) };
}
