import { windowKey, windowSourceOf, windowsOfRow } from "../../src/alerts/row-windows.js";
import { projectOf, seriesOf, timestampMsOf } from "../../src/alerts/usage.js";
import { countReport } from "../../src/alerts/counted-windows.js";
import {
  CREDIT_COLUMNS,
  type HotSeries,
  LIMIT_COLUMNS,
  MAX_WINDOWS_PER_SERIES,
  seriesField,
  thinPoints,
} from "../../src/headroom/hot-series.js";
import { isRateLimited, poolExhaustedBy } from "../../src/report/rate-limit.js";
import {
  REPORT_COLUMNS,
  type ReportColumn,
  type ReportRow,
} from "../../src/report/report-schema.js";

// hotUpdates (src/headroom/hot-series.ts) written plainly, one row at a time, every figure turned into
// text as it is read: the oracle its faster version is checked against.

const HAS_LIMITS = LIMIT_COLUMNS.slice(0, 4);
const HAS_CREDITS: ReportColumn[] = [...CREDIT_COLUMNS, "request_cost"];
const REMAINING = {
  requests: "requests_remaining",
  tokens: "tokens_remaining",
  credits: "credits_remaining",
} as const;

const at = (c: ReportColumn) => REPORT_COLUMNS.indexOf(c);
const text = (v: unknown): string | null =>
  v === null || v === undefined || v === "" ? null : String(v);
const newer = (t: number, id: string, t0: number | undefined, id0: string | undefined) =>
  t0 === undefined || t > t0 || (t === t0 && id > (id0 ?? ""));
const byTime = (a: [number, string], b: [number, string]) =>
  a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);

function addRow(into: HotSeries | undefined, row: ReportRow): HotSeries {
  const t = timestampMsOf(row);
  const id = String(row[at("report_id")]);
  const s: HotSeries = into ?? { ls: t, p: {} };
  s.ls = Math.max(s.ls, t);
  // The pool of the newest report: its account's hash, else its label, else none ('').
  if (!s.g || newer(t, id, s.g[0], s.g[1])) {
    const account = text(row[REPORT_COLUMNS.indexOf("account" as ReportColumn)]);
    const label = text(row[REPORT_COLUMNS.indexOf("pool" as ReportColumn)]);
    const key = account ? `a:${account}` : label ? `l:${label}` : "";
    s.g = [t, id, key, String(row[at("key_id")])];
  }
  const limits = HAS_LIMITS.some((c) => row[at(c)] !== null);
  const credits = HAS_CREDITS.some((c) => row[at(c)] !== null);
  // A rate limit (an error body that says one) that names no window marks the pool; any other
  // report is the newest that was not limited.
  const source = windowSourceOf(row, t);
  const said = source.headers !== null || source.error !== null;
  const limited = source.error !== null && isRateLimited(source);
  if (limited) {
    const mark = poolExhaustedBy(source, windowsOfRow(row));
    if (mark && (!s.x || newer(t, id, s.x[0], s.x[1]))) s.x = [t, id, mark.until];
  } else s.o = Math.max(s.o ?? t, t);
  // Counted: a call that was not limited and states no remaining (no hint).
  const statesRemaining =
    (limits || credits || said) && windowsOfRow(row).some((w) => w.remaining !== null);
  if (!limited && !statesRemaining && (row[at("model")] !== null || limits || credits)) {
    const usage = (c: string) => {
      const v = row[REPORT_COLUMNS.indexOf(c as ReportColumn)];
      return v === null || v === undefined ? null : Number(v);
    };
    s.k ??= {};
    countReport(s.k, {
      t,
      requests: 1,
      input_tokens: usage("usage_input_tokens"),
      output_tokens: usage("usage_output_tokens"),
    });
  }
  if (limits || credits) {
    for (const w of windowsOfRow(row)) {
      const key = windowKey(w);
      // A limit learned from a 429: the newest per window.
      if (w.source === "learned" && w.limit !== null) {
        s.lw ??= {};
        const learned = s.lw[key];
        if (
          learned
            ? newer(t, id, learned[0], learned[1])
            : Object.keys(s.lw).length < MAX_WINDOWS_PER_SERIES
        )
          s.lw[key] = [t, id, String(w.limit)];
      }
      s.w ??= {};
      const kept = s.w[key];
      if (!kept && Object.keys(s.w).length >= MAX_WINDOWS_PER_SERIES) continue;
      if (!kept || newer(t, id, kept[0], kept[1])) {
        s.w[key] =
          w.source && w.source !== "stated"
            ? [t, id, text(w.limit), text(w.remaining), w.resets_at, w.source]
            : [t, id, text(w.limit), text(w.remaining), w.resets_at];
      }
      if (w.remaining === null) continue;
      const wp = s.wp ?? {};
      const list = wp[key] ?? [];
      list.push([t, String(w.remaining)]);
      wp[key] = list;
      s.wp = wp;
    }
    if (s.w && Object.keys(s.w).length === 0) delete s.w;
  }
  if (limits && newer(t, id, s.la, s.li)) {
    s.la = t;
    s.li = id;
    s.l = LIMIT_COLUMNS.map((c) => text(row[at(c)]));
  }
  if (credits && newer(t, id, s.ca, s.ci)) {
    s.ca = t;
    s.ci = id;
    s.c = CREDIT_COLUMNS.map((c) => text(row[at(c)]));
  }
  for (const metric of ["requests", "tokens", "credits"] as const) {
    const v = text(row[at(REMAINING[metric])]);
    if (v === null) continue;
    const list = s.p[metric] ?? [];
    list.push([t, v]);
    s.p[metric] = list;
  }
  return s;
}

export function hotUpdatesReference(rows: ReportRow[]): Map<string, Map<string, HotSeries>> {
  const out = new Map<string, Map<string, HotSeries>>();
  for (const row of rows) {
    if (!Number.isFinite(timestampMsOf(row))) continue;
    const project = projectOf(row);
    let series = out.get(project);
    if (!series) {
      series = new Map();
      out.set(project, series);
    }
    const field = seriesField(seriesOf(row));
    series.set(field, addRow(series.get(field), row));
  }
  for (const series of out.values())
    for (const s of series.values())
      for (const metric of ["requests", "tokens", "credits"] as const) {
        const list = s.p[metric];
        if (list) s.p[metric] = thinPoints(list.sort(byTime));
      }
  for (const series of out.values())
    for (const s of series.values())
      for (const [key, list] of Object.entries(s.wp ?? {})) {
        (s.wp as Record<string, [number, string][]>)[key] = thinPoints(list.sort(byTime));
      }
  return out;
}
