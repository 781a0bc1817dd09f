import type { Point } from "./burn-rate.js";
import type { WindowFiguresSource, WindowLength } from "../providers/window.js";
import type { ResetKind } from "./counted-windows.js";

// One window of a series as the hot copy keeps it (hot-series.ts), before the answer's moment is
// applied (headroom-view.ts): its newest figures, its recent points, and what Headroom adds to
// what the provider stated (window-figures.ts).

export interface LatestWindow {
  dimension: string;
  window: WindowLength | null;
  /** Where the figures come from (window.ts); absent: stated. */
  source?: WindowFiguresSource;
  limit: number | null;
  remaining: number | null;
  /** When the newest report carrying this window was sent (its timestamp), Unix ms. */
  reportedAt: number;
  /** Absolute, Unix ms; null when the provider did not say. */
  resetsAt: number | null;
  /** Recent [Unix ms, remaining], oldest first. */
  points: Point[];
  /** The newest limit learned for it (a 429's quota), and where: its report's time and id. */
  learned?: { limit: number; at: number; reportId: string };
  /** How a counted window resets (counted-windows.ts); absent for the others. */
  resets?: ResetKind;
}
