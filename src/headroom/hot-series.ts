import type { Point } from "../alerts/burn-rate.js";
import {
  type DeriveWindows,
  parseWindowKey,
  windowKey,
  windowSourceOf,
} from "../alerts/row-windows.js";
import type { Metric } from "../alerts/rule.js";
import { timestampReader } from "../alerts/usage.js";
import { deriveWindows } from "../providers/derive-windows.js";
import {
  KNOWN_DIMENSIONS,
  MAX_WINDOWS,
  WINDOW_LENGTHS,
  WINDOW_SOURCES,
  type Window,
  type WindowFiguresSource,
} from "../providers/window.js";
import { poolKeyOf } from "../report/pool-key.js";
import { isRateLimited, poolExhaustedBy } from "../report/rate-limit.js";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "../report/report-schema.js";
import { countedCallOf, countReport, type HotCounts } from "../alerts/counted-windows.js";
import type { LatestFigures, LatestWindow, RecentPoints } from "./headroom-view.js";

// The hot headroom of one series as kept in Redis (hot-store.ts merges these): the latest
// figures as latest_limits defines them — the newest report's limits among the reports that carry
// any, the newest credits likewise, so a provider hint moves `ls` and never blanks them — and the
// recent remaining values the burn rate is computed from. Beside them, the series' windows
// (src/providers/window.ts, derived from each row by windowsOfRow): per window (dimension and
// length) the newest report's figures that carry it, and its recent points. A window a newer
// report does not carry keeps its last figures (a provider sends its day window with every
// answer; a report without it says nothing of it), at most MAX_WINDOWS_PER_SERIES per series. Figures stay ClickHouse's text (Int64
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
  /** Per window key (windowKey): the newest figures that carry it. */
  w?: Record<string, HotWindow>;
  /** Per window key: recent [Unix ms, remaining], oldest first. */
  wp?: Record<string, [number, string][]>;
  /**
   * The pool of the newest report (docs/pools.md): its timestamp, id (ties), pool key (poolKeyOf:
   * '' for the app alone) and key id. The newest report decides: a series is in one pool at once.
   */
  g?: HotPool;
  /**
   * The newest rate limit that named no window (report/rate-limit.ts): its report's timestamp,
   * id (ties) and the retry time it stated (null: none). The pool is exhausted until then.
   */
  x?: HotExhausted;
  /** The newest timestamp of a report that was no rate limit: a mark older than it is over. */
  o?: number;
  /**
   * Per window key, the newest limit learned from a limit error's body (a Gemini 429's quota
   * value): [report timestamp, report id, limit]. Kept past the window's own figures, until a
   * later one changes it.
   */
  lw?: Record<string, HotLearned>;
  /**
   * What the reports that state no remaining say was used, in buckets of fixed periods
   * (counted-windows.ts): counted against a learned or declared limit. Added up by the merge
   * (hot-merge.ts) once per batch.
   */
  k?: HotCounts;
}

/** [report timestamp (ms), report id, limit as text] of a learned limit. */
export type HotLearned = [number, string, string];

/** [report timestamp (ms), report id, retry time (ms) or null] of a pool-wide rate limit. */
export type HotExhausted = [number, string, number | null];

/** [report timestamp (ms), report id, pool key, key id] of a series' newest report. */
export type HotPool = [number, string, string, string];

/**
 * A window's newest figures: report timestamp (ms), report id (ties), limit, remaining, resets_at,
 * and where they come from when not `stated` (absent in a copy kept before sources: stated).
 */
export type HotWindow =
  | [number, string, string | null, string | null, number | null]
  | [number, string, string | null, string | null, number | null, WindowFiguresSource];

/**
 * Windows a series keeps (src/providers/window.ts's MAX_WINDOWS, which a report carries at most);
 * a window past it is not kept (the merge keeps the first ones), so neither a parser gone
 * wrong nor a tenant's invented names can grow a series without bound.
 */
export const MAX_WINDOWS_PER_SERIES = MAX_WINDOWS;

/** The latest limits a series keeps (HotSeries.l), in order. */
export const LIMIT_COLUMNS = [
  "requests_limit",
  "requests_remaining",
  "tokens_limit",
  "tokens_remaining",
  "reset_requests_ms",
  "reset_tokens_ms",
] as const satisfies ReportColumn[];
/** The latest credits a series keeps (HotSeries.c), in order. */
export const CREDIT_COLUMNS = [
  "credits_limit",
  "credits_remaining",
] as const satisfies ReportColumn[];
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
const KEY_ID = at("key_id");
const PROJECT = at("project_id");
const PROVIDER = at("provider");
const MODEL = at("model");
const APP = at("app");
const LIMIT_AT = LIMIT_COLUMNS.map(at);
const CREDIT_AT = CREDIT_COLUMNS.map(at);
const HAS_LIMITS_AT = HAS_LIMITS.map(at);
const HAS_CREDITS_AT = HAS_CREDITS.map(at);
const METRICS = ["requests", "tokens", "credits"] as const satisfies Metric[];
const REMAINING_AT = METRICS.map((m) => at(REMAINING[m]));

/** A series' hash field: provider, model ('' when none), app. */
export const seriesField = (s: { provider: string; model: string; app: string }) =>
  JSON.stringify([s.provider, s.model, s.app]);

/** Whether `(t, id)` is newer than `(t0, id0)`: latest_limits' argMax by timestamp, ties by id. */
const newer = (t: number, id: string, t0: number | undefined, id0: string | undefined) =>
  t0 === undefined || t > t0 || (t === t0 && id > (id0 ?? ""));

const anyIn = (row: ReportRow, columns: number[]) => columns.some((i) => row[i] !== null);

type Value = ReportRow[number];

/**
 * A series as a batch is read: figures stay the rows' own values (the newest rows are kept) and
 * become text once, for what is sent: the newest rows' figures and the points thinning keeps.
 */
interface Gathering {
  s: HotSeries;
  limitsRow?: ReportRow;
  creditsRow?: ReportRow;
  p: Partial<Record<Metric, [number, Value][]>>;
  /** Per window key: the newest row's window (kept as read; text once, at the end) and points. */
  w: Map<string, WindowGathering>;
}

interface WindowGathering {
  t: number;
  id: string;
  win: Window;
  points: [number, Value][];
}

/** Window keys by dimension and length: made once, not once per row. */
const keys = new Map<string, Map<string | null, string>>();
function keyOf(win: Window): string {
  let byLength = keys.get(win.dimension);
  if (!byLength) {
    // Dimensions are the parsers' names, a bounded set; a flood of odd ones is not kept here.
    if (keys.size >= 1_000) keys.clear();
    byLength = new Map();
    keys.set(win.dimension, byLength);
  }
  let key = byLength.get(win.window);
  if (key === undefined) {
    key = windowKey(win);
    byLength.set(win.window, key);
  }
  return key;
}

const HEADERS_AT = REPORT_COLUMNS.indexOf("headers" as ReportColumn);
const ERROR_AT = REPORT_COLUMNS.indexOf("error" as ReportColumn);
/** Whether a row carries what windows are derived from (part B's headers and error, when present). */
const saidSomething = (row: ReportRow) =>
  (HEADERS_AT >= 0 && row[HEADERS_AT] != null) || (ERROR_AT >= 0 && row[ERROR_AT] != null);

function addWindows(g: Gathering, windows: Window[], t: number, id: string) {
  for (const win of windows) {
    const key = keyOf(win);
    if (win.source === "learned" && win.limit !== null) learn(g.s, key, t, id, win.limit);
    const kept = g.w.get(key);
    if (!kept) {
      if (g.w.size >= MAX_WINDOWS_PER_SERIES) continue;
      g.w.set(key, { t, id, win, points: win.remaining === null ? [] : [[t, win.remaining]] });
      continue;
    }
    if (newer(t, id, kept.t, kept.id)) {
      kept.t = t;
      kept.id = id;
      kept.win = win;
    }
    if (win.remaining !== null) kept.points.push([t, win.remaining]);
  }
}

function addRow(g: Gathering, row: ReportRow, t: number, derive: DeriveWindows): void {
  const s = g.s;
  s.ls = Math.max(s.ls, t);
  const id = String(row[ID]);
  if (!s.g || newer(t, id, s.g[0], s.g[1])) s.g = [t, id, poolKeyOf(row), String(row[KEY_ID])];
  const limits = anyIn(row, HAS_LIMITS_AT);
  const credits = anyIn(row, HAS_CREDITS_AT);
  let limited = false;
  let statesRemaining = false;
  if (limits || credits || saidSomething(row)) {
    const source = windowSourceOf(row, t);
    const { windows } = derive(source);
    addWindows(g, windows, t, id);
    statesRemaining = windows.some((w) => w.remaining !== null);
    if (ERROR_AT >= 0 && row[ERROR_AT] != null && isRateLimited(source)) {
      limited = true;
      const pool = poolExhaustedBy(source, windows);
      if (pool && (!s.x || newer(t, id, s.x[0], s.x[1]))) s.x = [t, id, pool.until];
    }
  }
  if (!limited) s.o = Math.max(s.o ?? t, t);
  const use = countedCallOf(row, t, { limited, statesRemaining, figures: limits || credits });
  if (use) {
    s.k ??= {};
    countReport(s.k, use);
  }
  if (limits || credits) {
    const id = String(row[ID]);
    if (limits && newer(t, id, s.la, s.li)) {
      s.la = t;
      s.li = id;
      g.limitsRow = row;
    }
    if (credits && newer(t, id, s.ca, s.ci)) {
      s.ca = t;
      s.ci = id;
      g.creditsRow = row;
    }
  }
  for (let m = 0; m < METRICS.length; m++) {
    const v = row[REMAINING_AT[m] as number];
    if (v === null || v === undefined || v === "") continue;
    const metric = METRICS[m] as Metric;
    const list = g.p[metric];
    if (list) list.push([t, v]);
    else g.p[metric] = [[t, v]];
  }
}

/** A limit learned at (t, id): kept when newer than the one kept, within the windows' bound. */
function learn(s: HotSeries, key: string, t: number, id: string, limit: number): void {
  s.lw ??= {};
  const kept = s.lw[key];
  if (kept ? !newer(t, id, kept[0], kept[1]) : Object.keys(s.lw).length >= MAX_WINDOWS_PER_SERIES)
    return;
  s.lw[key] = [t, id, String(limit)];
}

/** Gathers a series' rows; what it adds to the hot copy once every row is in. */
function seriesOfBatch(g: Gathering): HotSeries {
  const { s, limitsRow, creditsRow } = g;
  if (limitsRow) s.l = LIMIT_AT.map((i) => text(limitsRow[i]));
  if (creditsRow) s.c = CREDIT_AT.map((i) => text(creditsRow[i]));
  for (const metric of Object.keys(g.p) as Metric[]) {
    const list = orderedPoints(g.p[metric] as [number, Value][]);
    s.p[metric] = thinPoints(list).map(([t, v]): [number, string] => [t, String(v)]);
  }
  for (const [key, { t, id, win, points }] of g.w) {
    s.w ??= {};
    const fig: HotWindow = [t, id, text(win.limit), text(win.remaining), win.resets_at];
    if (win.source !== undefined && win.source !== "stated") fig.push(win.source);
    s.w[key] = fig;
    if (points.length === 0) continue;
    s.wp ??= {};
    s.wp[key] = thinPoints(orderedPoints(points)).map(([pt, v]): [number, string] => [
      pt,
      String(v),
    ]);
  }
  return s;
}

/** A point closer than this to the one before replaces it (burn-rate.ts: one observation). */
export const MIN_GAP_MS = 1_000;

/**
 * A sorted list of points cut to what the merge (hot-merge.ts) can keep of it, whatever is
 * stored: the merge keeps one point per run of points less than MIN_GAP_MS apart (its last; and
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

/**
 * A series' points in the merge's order (hot-merge.ts: by time, then by the value's text),
 * with each millisecond's points cut to the first and the last: thinPoints keeps nothing from
 * the middle of a millisecond (a run never ends there, nor does a step of its chain). A batch's
 * reports often share their millisecond, and only those points need their text to be ordered.
 */
function orderedPoints(list: [number, Value][]): [number, Value][] {
  list.sort((a, b) => a[0] - b[0]);
  const out: [number, Value][] = [];
  for (let i = 0; i < list.length; ) {
    const first = list[i] as [number, Value];
    let end = i + 1;
    while (end < list.length && (list[end] as [number, Value])[0] === first[0]) end++;
    if (end - i === 1) out.push(first);
    else {
      // Stable, as a sort would be: the first of equal texts is the lowest, the last the highest.
      let lo = String(first[1]);
      let hi = lo;
      for (let k = i + 1; k < end; k++) {
        const v = String((list[k] as [number, Value])[1]);
        if (v < lo) lo = v;
        if (v >= hi) hi = v;
      }
      out.push([first[0], lo], [first[0], hi]);
    }
    i = end;
  }
  return out;
}

/** The map's value at `key`, made and set when it has none. */
export function entry<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}

/** A batch of stored rows → per project, per series field, what they add to the hot copy. */
export function hotUpdates(
  rows: ReportRow[],
  derive: DeriveWindows = deriveWindows,
): Map<string, Map<string, HotSeries>> {
  const timestampOf = timestampReader();
  const gathered = new Map<string, Map<string, Gathering>>();
  // provider → model → app → series field: one JSON.stringify per series, not per row.
  const fields = new Map<string, Map<string, Map<string, string>>>();
  for (const row of rows) {
    const t = timestampOf(row);
    if (!Number.isFinite(t)) continue;
    const project = String(row[PROJECT]);
    const series = entry(gathered, project, () => new Map<string, Gathering>());
    const provider = String(row[PROVIDER]);
    const model = row[MODEL] === null ? "" : String(row[MODEL]);
    const app = String(row[APP]);
    const byModel = entry(fields, provider, () => new Map<string, Map<string, string>>());
    const byApp = entry(byModel, model, () => new Map<string, string>());
    const field = entry(byApp, app, () => seriesField({ provider, model, app }));
    const g = entry(series, field, (): Gathering => ({ s: { ls: t, p: {} }, p: {}, w: new Map() }));
    addRow(g, row, t, derive);
  }
  const out = new Map<string, Map<string, HotSeries>>();
  for (const [project, series] of gathered) {
    const updates = new Map<string, HotSeries>();
    for (const [field, g] of series) updates.set(field, seriesOfBatch(g));
    out.set(project, updates);
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
      windows: hotWindows(s, since),
      ...(Array.isArray(s.x) && typeof s.x[0] === "number"
        ? {
            exhausted: {
              at: s.x[0],
              reportId: String(s.x[1]),
              until: typeof s.x[2] === "number" ? s.x[2] : null,
            },
          }
        : {}),
      okAt: typeof s.o === "number" ? s.o : null,
      ...(s.k && typeof s.k === "object" ? { counts: s.k } : {}),
    },
    recent: { requests: recent("requests"), tokens: recent("tokens"), credits: recent("credits") },
  };
}

const rankOf = <T extends string>(list: readonly T[], v: string | null) => {
  const i = list.indexOf(v as T);
  return i < 0 ? list.length : i;
};

/** Windows in a reader's order: Headroom's dimensions first, then by length, shortest first. */
export function compareWindows(
  a: { dimension: string; window: string | null },
  b: { dimension: string; window: string | null },
): number {
  return (
    rankOf(KNOWN_DIMENSIONS, a.dimension) - rankOf(KNOWN_DIMENSIONS, b.dimension) ||
    (a.dimension < b.dimension ? -1 : a.dimension > b.dimension ? 1 : 0) ||
    rankOf(WINDOW_LENGTHS, a.window) - rankOf(WINDOW_LENGTHS, b.window)
  );
}

/** A stored source: one of WINDOW_SOURCES, else (absent, or a copy gone wrong) stated. */
const sourceOf = (v: unknown): WindowFiguresSource =>
  WINDOW_SOURCES.includes(v as WindowFiguresSource) ? (v as WindowFiguresSource) : "stated";

/** A stored learned limit, or undefined when it is none (a copy gone wrong). */
function learnedOf(fig: unknown): LatestWindow["learned"] {
  if (!Array.isArray(fig) || typeof fig[0] !== "number") return undefined;
  const limit = Number(fig[2]);
  return Number.isFinite(limit) ? { limit, at: fig[0], reportId: String(fig[1]) } : undefined;
}

/** A stored series' windows, with their points since `since` and the limits learned for them. */
function hotWindows(s: HotSeries, since: number): LatestWindow[] {
  const out: LatestWindow[] = [];
  const learned = s.lw ?? {};
  for (const [key, fig] of Object.entries(s.w ?? {})) {
    if (!Array.isArray(fig)) continue;
    const [t, , limit, remaining, resetsAt, source] = fig;
    const l = learnedOf(learned[key]);
    // Named fields, not a spread of parseWindowKey's: see windowNow (now-model.ts) for why.
    const { dimension, window } = parseWindowKey(key);
    out.push({
      dimension,
      window,
      source: sourceOf(source),
      limit: num(limit),
      remaining: num(remaining),
      reportedAt: t,
      resetsAt: typeof resetsAt === "number" ? resetsAt : null,
      points: points(s.wp?.[key]).filter(([pt]) => pt >= since),
      ...(l ? { learned: l } : {}),
    });
  }
  // A limit learned for a window the copy keeps no figures of: the limit alone.
  for (const [key, fig] of Object.entries(learned)) {
    const l = learnedOf(fig);
    if (!l || s.w?.[key]) continue;
    const { dimension, window } = parseWindowKey(key);
    out.push({
      dimension,
      window,
      source: "learned",
      limit: l.limit,
      remaining: null,
      reportedAt: l.at,
      resetsAt: null,
      points: [],
      learned: l,
    });
  }
  return out.sort(compareWindows);
}
