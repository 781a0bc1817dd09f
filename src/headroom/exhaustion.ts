import type { LatestWindow } from "../alerts/latest-window.js";

// A rate limit that named no window (src/report/rate-limit.ts: Bedrock's ThrottlingException,
// Vertex's bare RESOURCE_EXHAUSTED) exhausts the model's pool as a whole: every window of it reads
// 0 remaining from the limit's report until the retry delay it stated, else until the window's
// own reset after it, else until a later report that was not limited; a pool with no window at
// all shows it as its requests, of unknown length. A window whose figures are newer than the
// mark keeps them. Pure.

export interface PoolMark {
  /** The limited report's timestamp, Unix ms. */
  at: number;
  reportId: string;
  /** When it said to retry, Unix ms; null when it did not say. */
  until: number | null;
}

/** A window's newest figures (latest-window.ts). */
export type MarkedWindow = LatestWindow;

/** The windows as they read at `now`, the pool's mark applied. */
export function withPoolMark(
  windows: LatestWindow[],
  mark: PoolMark | undefined,
  okAt: number | null,
  now: number,
): LatestWindow[] {
  // A later report that was not limited says the pool has room again.
  if (!mark || (okAt !== null && okAt > mark.at) || now < mark.at) return windows;
  const marked = (w: Pick<MarkedWindow, "resetsAt">): number | null | undefined => {
    const end = mark.until ?? (w.resetsAt !== null && w.resetsAt > mark.at ? w.resetsAt : null);
    return end === null || now < end ? end : undefined;
  };
  if (windows.length === 0) {
    const end = marked({ resetsAt: null });
    if (end === undefined) return windows;
    return [
      {
        dimension: "requests",
        window: null,
        source: "stated",
        limit: null,
        remaining: 0,
        reportedAt: mark.at,
        resetsAt: end,
        points: [],
      },
    ];
  }
  return windows.map((w) => {
    if (w.reportedAt > mark.at) return w;
    const end = marked(w);
    if (end === undefined) return w;
    // A counted remaining gives way to the provider's own 0: the figures are the limit's now.
    const source =
      w.source === "counted"
        ? w.learned
          ? ("learned" as const)
          : ("declared" as const)
        : w.source;
    return { ...w, source, remaining: 0, reportedAt: mark.at, resetsAt: end, points: [] };
  });
}
