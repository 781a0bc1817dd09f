import type { Point } from "../alerts/burn-rate.js";
import type { Metric } from "../alerts/rule.js";
import { projectOf, seriesOf, timestampMsOf } from "../alerts/usage.js";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "../report/report-schema.js";
import type { LatestFigures, RecentPoints } from "./headroom-view.js";

// The hot headroom of one series as kept in Redis (hot-store.ts merges these): the latest
// figures as latest_limits defines them — the newest report's limits among the reports that carry
// any, the newest credits likewise, so a provider hint moves `ls` and never blanks them — and the
// recent remaining values the burn rate is computed from. Figures stay ClickHouse's text (Int64
// and Decimal do not all fit a double); times are Unix ms. Pure.

export interface HotSeries {
  /** Last seen: the newest report's timestamp. */
  ls: number;
  /** The newest report with limits: its timestamp, id (ties), and figures in LIMIT_COLUMNS order. */
  la?: number;
  li?: string;
  l?: (string | null)[];
  /** The newest report with credits, likewise (CREDIT_COLUMNS). */
  ca?: number;
  ci?: string;
  c?: (string | null)[];
  /** Recent [Unix ms, remaining] per metric, oldest first. */
  p: Partial<Record<Metric, [number, string][]>>;
}

const LIMIT_COLUMNS = [
  "requests_limit",
  "requests_remaining",
  "tokens_limit",
  "tokens_remaining",
  "reset_requests_ms",
  "reset_tokens_ms",
] as const satisfies ReportColumn[];
const CREDIT_COLUMNS = ["credits_limit", "credits_remaining"] as const satisfies ReportColumn[];
/** latest_limits' HAS_LIMITS and HAS_CREDITS: which reports carry figures at all. */
const HAS_LIMITS = LIMIT_COLUMNS.slice(0, 4);
const HAS_CREDITS = [...CREDIT_COLUMNS, "request_cost"] as const satisfies ReportColumn[];
const REMAINING: Record<Metric, ReportColumn> = {
  requests: "requests_remaining",
  tokens: "tokens_remaining",
  credits: "credits_remaining",
};

const at = (c: ReportColumn) => REPORT_COLUMNS.indexOf(c);
const text = (v: unknown): string | null =>
  v === null || v === undefined || v === "" ? null : String(v);
const ID = at("report_id");

/** A series' hash field: provider, model ('' when none), app. */
export const seriesField = (s: { provider: string; model: string; app: string }) =>
  JSON.stringify([s.provider, s.model, s.app]);

/** Whether `(t, id)` is newer than `(t0, id0)`: latest_limits' argMax by timestamp, ties by id. */
const newer = (t: number, id: string, t0: number | undefined, id0: string | undefined) =>
  t0 === undefined || t > t0 || (t === t0 && id > (id0 ?? ""));

function addRow(into: HotSeries | undefined, row: ReportRow): HotSeries {
  const t = timestampMsOf(row);
  const id = String(row[ID]);
  const s: HotSeries = into ?? { ls: t, p: {} };
  s.ls = Math.max(s.ls, t);
  if (HAS_LIMITS.some((c) => row[at(c)] !== null) && newer(t, id, s.la, s.li)) {
    s.la = t;
    s.li = id;
    s.l = LIMIT_COLUMNS.map((c) => text(row[at(c)]));
  }
  if (HAS_CREDITS.some((c) => row[at(c)] !== null) && newer(t, id, s.ca, s.ci)) {
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

/** A point closer than this to the one before replaces it (burn-rate.ts: one observation). */
export const MIN_GAP_MS = 1_000;

/**
 * A sorted list of points cut to what the merge script (hot-store.ts) can keep of it, whatever is
 * stored: the script keeps one point per run of points less than MIN_GAP_MS apart (its last; and
 * the first of the oldest run), and where runs begin and end depends only on the points that
 * stay here — each run's ends, and in between a chain whose steps stay under the gap. So a busy
 * series sends a point or two a second, not every report, and the result is the same.
 */
export function thinPoints<P extends [number, unknown]>(list: P[]): P[] {
  const out: P[] = [];
  for (let i = 0; i < list.length; ) {
    let end = i;
    while (end + 1 < list.length && (list[end + 1] as P)[0] - (list[end] as P)[0] < MIN_GAP_MS)
      end++;
    let at = i;
    out.push(list[at] as P);
    while (at < end) {
      let next = at + 1;
      while (next < end && (list[next + 1] as P)[0] - (list[at] as P)[0] < MIN_GAP_MS) next++;
      out.push(list[next] as P);
      at = next;
    }
    i = end + 1;
  }
  return out;
}

/** The merge script's order (hot-store.ts): by time, then by value's text. */
const byTime = (a: [number, string], b: [number, string]) =>
  a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);

/** A batch of stored rows → per project, per series field, what they add to the hot copy. */
export function hotUpdates(rows: ReportRow[]): Map<string, Map<string, HotSeries>> {
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
  return out;
}

const num = (v: string | null | undefined) => (v === null || v === undefined ? null : Number(v));
const points = (list: unknown): Point[] =>
  Array.isArray(list) ? list.map(([t, v]: [number, string]) => [t, Number(v)] as Point) : [];

/** A stored series → what headroom-view.ts needs: its figures and its points since `since`. */
export function hotFigures(
  field: string,
  s: HotSeries,
  since: number,
): { latest: LatestFigures; recent: RecentPoints } {
  const [provider, model, app] = JSON.parse(field) as [string, string, string];
  const l = s.l ?? [];
  const c = s.c ?? [];
  const recent = (m: Metric) => points(s.p?.[m]).filter(([t]) => t >= since);
  return {
    latest: {
      provider,
      model,
      app,
      lastSeen: s.ls,
      limitsAt: s.la ?? null,
      creditsAt: s.ca ?? null,
      requests: { limit: num(l[0]), remaining: num(l[1]), resetMs: num(l[4]) },
      tokens: { limit: num(l[2]), remaining: num(l[3]), resetMs: num(l[5]) },
      credits: { limit: num(c[0]), remaining: num(c[1]) },
    },
    recent: { requests: recent("requests"), tokens: recent("tokens"), credits: recent("credits") },
  };
}
