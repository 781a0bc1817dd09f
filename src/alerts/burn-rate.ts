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

/** Units used per second over the history, or null with too little of it to tell. */
export function burnPerSecond(history: Point[]): number | null {
  const first = history[0];
  const last = history.at(-1);
  if (!first || !last || last[0] - first[0] < MIN_GAP_MS) return null;
  return (first[1] - last[1]) / ((last[0] - first[0]) / 1000);
}
