// How fast a limit is being used up (when it would run out is now-model.ts's). A series keeps a
// few recent (time, remaining) points; the burn rate is the fall in `remaining` per second
// across them.
// A rise in `remaining` means the provider's window reset (or credits were topped up): the
// points before it say nothing about the new window, so the history starts again.

/** [Unix ms, remaining]. */
export type Point = [t: number, remaining: number];

export const HISTORY_WINDOW_MS = 5 * 60_000;
const HISTORY_MAX = 8;
/** Points closer than this replace the last one: a burst of reports is one observation. */
const MIN_GAP_MS = 1_000;

export function addPoint(history: Point[], point: Point): Point[] {
  const last = history.at(-1);
  if (last && point[1] > last[1]) return [point];
  let next = history.filter(([t]) => t >= point[0] - HISTORY_WINDOW_MS);
  const newest = next.at(-1);
  if (newest && point[0] - newest[0] < MIN_GAP_MS && next.length > 1) next = next.slice(0, -1);
  next.push(point);
  return next.length > HISTORY_MAX ? next.slice(next.length - HISTORY_MAX) : next;
}

/**
 * The history `addPoint` makes of the `points` that `keep` takes, fed in order, in one pass and
 * one array: a /headroom answer folds every window's points again (hundreds of windows a poll),
 * and a new array per point cost 3 µs a window (issue 48).
 */
export function historyOf(points: readonly Point[], keep?: (p: Point) => boolean): Point[] {
  // h[0..n) is the history; written in place, its length set once at the end.
  const h: Point[] = [];
  let n = 0;
  for (const point of points) {
    if (keep !== undefined && !keep(point)) continue;
    if (n > 0 && point[1] > (h[n - 1] as Point)[1]) {
      h[0] = point;
      n = 1;
      continue;
    }
    const from = point[0] - HISTORY_WINDOW_MS;
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const q = h[i] as Point;
      if (q[0] >= from) h[kept++] = q;
    }
    n = kept;
    if (n > 1 && point[0] - (h[n - 1] as Point)[0] < MIN_GAP_MS) n -= 1;
    h[n++] = point;
    if (n > HISTORY_MAX) {
      const drop = n - HISTORY_MAX;
      for (let i = 0; i < HISTORY_MAX; i++) h[i] = h[i + drop] as Point;
      n = HISTORY_MAX;
    }
  }
  h.length = n;
  return h;
}

/** Units used per second over the history, or null with too little of it to tell. */
export function burnPerSecond(history: Point[]): number | null {
  const first = history[0];
  const last = history.at(-1);
  if (!first || !last || last[0] - first[0] < MIN_GAP_MS) return null;
  return (first[1] - last[1]) / ((last[0] - first[0]) / 1000);
}
