import { HISTORY_WINDOW_MS } from "../alerts/burn-rate.js";
import { addCounts, pruneCounts } from "../alerts/counted-windows.js";
import { type HotSeries, MAX_WINDOWS_PER_SERIES, MIN_GAP_MS } from "./hot-series.js";

// How a batch's figures for one series merge into the stored copy (hot-store.ts). The figures
// commute: the newest win by timestamp, then report id, so writes and refills may interleave in
// any order and a redelivered batch changes none. Points are the sorted union of the stored and
// the batch's, thinned to one a MIN_GAP_MS, within the burn rate's window, the newest HOT_POINTS;
// which of the points under MIN_GAP_MS apart stays can depend on that order (a point the window
// cut no longer anchors a run), as it did in the Lua merge. It runs in the worker, not
// in Redis: a merge decodes and encodes the whole series, and in Redis's Lua that held Redis
// ~190 µs a series (300 ms a batch over 100 projects), every other command waiting behind it.

/** Points kept per series and metric: enough for the alerts' burn rate (8 points, 5 minutes). */
export const HOT_POINTS = 16;

type Point = [number, string];

const newer = (t: number, id: string | undefined, t0?: number, id0?: string) =>
  t0 === undefined || t > t0 || (t === t0 && (id ?? "") > (id0 ?? ""));

const isList = (v: unknown): v is unknown[] => Array.isArray(v);
const isRecord = (v: unknown): v is Record<string, never> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const pointOrder = (x: Point, y: Point) => x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0);

/** The stored and the batch's points: one sorted union, thinned, windowed and cut. */
export function mergePoints(stored: unknown, batch: Point[]): Point[] {
  const all = [...(isList(stored) ? (stored as Point[]) : []), ...batch].sort(pointOrder);
  const out: Point[] = [];
  for (const p of all) {
    const last = out[out.length - 1];
    if (last && last[0] === p[0] && last[1] === p[1]) continue;
    if (last && out.length > 1 && p[0] - last[0] < MIN_GAP_MS) out[out.length - 1] = p;
    else out.push(p);
  }
  const newest = (out[out.length - 1] as Point)[0];
  const kept = out.filter(([t]) => t >= newest - HISTORY_WINDOW_MS);
  return kept.slice(Math.max(0, kept.length - HOT_POINTS));
}

/** Per window key, the newer of the kept and the incoming figures; new ones while under the cap. */
function newestPerWindow<F extends [number, string, ...unknown[]]>(
  kept: Record<string, F> | undefined,
  incoming: Record<string, F>,
): Record<string, F> {
  const out = kept && typeof kept === "object" && !Array.isArray(kept) ? kept : {};
  let n = Object.keys(out).length;
  for (const [key, fig] of Object.entries(incoming)) {
    const was = out[key];
    if (was) {
      if (newer(fig[0], fig[1], was[0], was[1])) out[key] = fig;
    } else if (n < MAX_WINDOWS_PER_SERIES) {
      out[key] = fig;
      n += 1;
    }
  }
  return out;
}

/**
 * `next` (a batch's figures, or a refill's) merged into `old` (the stored copy, or null), at
 * `now`; `count`: add the batch's counted use (its token unclaimed), else leave counts as kept.
 * Mutates and returns `old` (a new copy when null, or when `old` is not a series at all).
 */
export function mergeHotSeries(
  old: unknown,
  next: HotSeries,
  now: number,
  count: boolean,
): HotSeries {
  const s: HotSeries =
    isRecord(old) && Number.isFinite(old.ls)
      ? (old as unknown as HotSeries)
      : { ls: next.ls, p: {} };
  s.ls = Math.max(s.ls, next.ls);
  if (next.la !== undefined && newer(next.la, next.li, s.la, s.li)) {
    s.la = next.la;
    s.li = next.li;
    s.l = next.l;
  }
  if (next.ca !== undefined && newer(next.ca, next.ci, s.ca, s.ci)) {
    s.ca = next.ca;
    s.ci = next.ci;
    s.c = next.c;
  }
  // The pool: the newest report's (hot-series.ts, HotSeries.g).
  if (isList(next.g) && (!isList(s.g) || newer(next.g[0], next.g[1], s.g[0], s.g[1]))) s.g = next.g;
  // A pool-wide rate limit: the newest report's; the newest report that was no rate limit.
  if (isList(next.x) && (!isList(s.x) || newer(next.x[0], next.x[1], s.x[0], s.x[1]))) s.x = next.x;
  if (typeof next.o === "number" && (typeof s.o !== "number" || next.o > s.o)) s.o = next.o;
  // Learned limits: the newest per window, as many windows as a series keeps.
  if (isRecord(next.lw)) s.lw = newestPerWindow(s.lw, next.lw);
  // Counted use: each bucket added to (a batch counted once), those past their kind's span dropped.
  if (count && isRecord(next.k)) s.k = addCounts(isRecord(s.k) ? s.k : {}, next.k);
  if (isRecord(s.k)) {
    pruneCounts(s.k, now);
    if (Object.keys(s.k).length === 0) delete s.k;
  } else delete s.k;
  if (!isRecord(s.p)) s.p = {};
  for (const m of ["requests", "tokens", "credits"] as const) {
    const b = next.p?.[m];
    if (isList(b) && b.length > 0) s.p[m] = mergePoints(s.p[m], b);
  }
  // Windows: the newest figures per window; a window the batch does not carry keeps its own.
  if (isRecord(next.w)) s.w = newestPerWindow(s.w, next.w);
  if (isRecord(next.wp) && isRecord(s.w)) {
    const wp: Record<string, Point[]> = isRecord(s.wp) ? s.wp : {};
    for (const [key, b] of Object.entries(next.wp as Record<string, Point[]>)) {
      if (s.w[key] && isList(b) && b.length > 0) wp[key] = mergePoints(wp[key], b);
    }
    s.wp = wp;
  }
  return s;
}
