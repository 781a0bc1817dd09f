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

/**
 * Adds `point` to the history h[0..n), in place; returns its new length. One rule for the alerts'
 * history (addPoint, a point at a time) and the model of now's (historyOf, a window's points).
 */
function addInPlace(h: Point[], n: number, point: Point): number {
  if (n > 0 && point[1] > (h[n - 1] as Point)[1]) {
    h[0] = point;
    return 1;
  }
  const from = point[0] - HISTORY_WINDOW_MS;
  let kept = 0;
  for (let i = 0; i < n; i++) {
    const q = h[i] as Point;
    if (q[0] >= from) h[kept++] = q;
  }
  if (kept > 1 && point[0] - (h[kept - 1] as Point)[0] < MIN_GAP_MS) kept -= 1;
  h[kept++] = point;
  if (kept <= HISTORY_MAX) return kept;
  const drop = kept - HISTORY_MAX;
  for (let i = 0; i < HISTORY_MAX; i++) h[i] = h[i + drop] as Point;
  return HISTORY_MAX;
}

/** The history with `point` added: a new array, `history` left as it was. */
export function addPoint(history: Point[], point: Point): Point[] {
  const h = history.slice();
  h.length = addInPlace(h, h.length, point);
  return h;
}

/**
 * The history `addPoint` makes of the `points` that `keep` takes, fed in order, in one array: a
 * /headroom answer folds every window's points again (hundreds of windows a poll), and a new
 * array per point cost 3 µs a window (issue 48).
 */
export function historyOf(points: readonly Point[], keep?: (p: Point) => boolean): Point[] {
  const h: Point[] = [];
  let n = 0;
  for (const point of points) if (keep === undefined || keep(point)) n = addInPlace(h, n, point);
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
