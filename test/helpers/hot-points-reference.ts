import { HISTORY_WINDOW_MS } from "../../src/alerts/burn-rate.js";
import { MIN_GAP_MS } from "../../src/headroom/hot-series.js";
import { HOT_POINTS } from "../../src/headroom/hot-merge.js";

// The hot headroom script's rule for points (src/headroom/hot-store.ts), written plainly over a sort
// of everything: the oracle its one-pass merge and the batch's thinning are checked against.

export type Point = [number, string];

export const pointOrder = (x: Point, y: Point) =>
  x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0);

export function mergePointsReference(stored: Point[], batch: Point[]): Point[] {
  const out: Point[] = [];
  for (const p of [...stored, ...batch].sort(pointOrder)) {
    const last = out.at(-1);
    if (last && last[0] === p[0] && last[1] === p[1]) continue;
    if (last && out.length > 1 && p[0] - last[0] < MIN_GAP_MS) out[out.length - 1] = p;
    else out.push(p);
  }
  const newest = out.at(-1)?.[0] ?? 0;
  return out.filter(([t]) => t >= newest - HISTORY_WINDOW_MS).slice(-HOT_POINTS);
}
