import { deriveWindows } from "../providers/derive-windows.js";
import type { DerivedWindows, Window, WindowLength, WindowSource } from "../providers/window.js";
import { isRateLimited, type PoolExhausted, poolExhaustedBy } from "../report/rate-limit.js";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "../report/report-schema.js";

// A stored row's windows (src/providers/window.ts), as every reader of rows derives them: the hot
// headroom (src/headroom/hot-series.ts) and the alerts (usage.ts). A row becomes the parsers'
// WindowSource directly — what windowsOfRecord does for a record, without turning the row into a
// record and its time into text and back: the hot headroom derives every row of every batch. The
// derivation is injectable (`DeriveWindows`, deriveWindows's signature), so that a test can give
// a row a window set the running parsers do not make yet; everything else is the real path.

export type DeriveWindows = (source: WindowSource) => DerivedWindows;

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

/** A row's timestamp (ClickHouse DateTime64(3) text, UTC) → Unix ms. */
const timestampOf = (row: ReportRow) =>
  Date.parse(`${String(row[I.timestamp]).replace(" ", "T")}Z`);

const parseJson = (text: string | null): unknown => {
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

/** What the parsers read from a row; `at`: its timestamp in Unix ms, when the caller has it. */
export function windowSourceOf(row: ReportRow, at: number = timestampOf(row)): WindowSource {
  const creditsLimit = num(row, I.creditsLimit);
  const creditsRemaining = num(row, I.creditsRemaining);
  const headers = parseJson(textOf(row, I.headers));
  return {
    provider: String(row[I.provider]),
    at,
    limits: {
      requests_limit: num(row, I.requestsLimit),
      requests_remaining: num(row, I.requestsRemaining),
      tokens_limit: num(row, I.tokensLimit),
      tokens_remaining: num(row, I.tokensRemaining),
      reset_requests_ms: num(row, I.resetRequests),
      reset_tokens_ms: num(row, I.resetTokens),
    },
    credits:
      creditsLimit === null && creditsRemaining === null
        ? null
        : { credits_limit: creditsLimit, credits_remaining: creditsRemaining },
    headers:
      headers !== null && typeof headers === "object" ? (headers as Record<string, string>) : null,
    error: parseJson(textOf(row, I.error)),
  };
}

/** A row's windows through `derive` (deriveWindows unless a test gives its own). */
export function windowsOfRow(
  row: ReportRow,
  derive: DeriveWindows = deriveWindows,
  at?: number,
): Window[] {
  return derive(windowSourceOf(row, at)).windows;
}

/** What a row says of its limits: its windows, and whether it was a rate limit (rate-limit.ts). */
export interface RowReading {
  windows: Window[];
  /** Its error body says a rate limit was hit. */
  limited: boolean;
  /** The limit named none of its windows: the pool is exhausted. */
  pool: PoolExhausted | null;
}

/** A row's windows through `derive`, and the rate limit its error body states. */
export function readingOfRow(
  row: ReportRow,
  derive: DeriveWindows = deriveWindows,
  at?: number,
): RowReading {
  const source = windowSourceOf(row, at);
  const { windows } = derive(source);
  const limited = source.error !== null && isRateLimited(source);
  return { windows, limited, pool: limited ? poolExhaustedBy(source, windows) : null };
}

const remembered = new WeakMap<DeriveWindows, WeakMap<ReportRow, RowReading>>();

/**
 * readingOfRow, remembered per row (and derive function) while the row lives: the alerts read a
 * row once per rule that watches it, and derive it once.
 */
export function rememberedReadingOfRow(
  row: ReportRow,
  derive: DeriveWindows = deriveWindows,
  at?: number,
): RowReading {
  let byRow = remembered.get(derive);
  if (!byRow) {
    byRow = new WeakMap();
    remembered.set(derive, byRow);
  }
  let reading = byRow.get(row);
  if (!reading) {
    reading = readingOfRow(row, derive, at);
    byRow.set(row, reading);
  }
  return reading;
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
