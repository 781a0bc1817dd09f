import { windowKey } from "./row-windows.js";
import type { DeclaredLimit } from "../providers/declared-limit.js";
import type { WindowFiguresSource } from "../providers/window.js";
import { countedUse, type HotCounts, isCounted, resetKindOf } from "./counted-windows.js";
import type { LatestWindow } from "./latest-window.js";

// A series' (or pool's) windows at the moment of an answer, each with the figures it has and
// where they come from (docs/providers.md):
//
// - a window whose remaining the provider states, and which has not reset since, keeps its
//   figures; a limit it does not state is the one learned from a 429, else the declared one;
// - a window with a limit (learned, else declared) whose remaining no report states (or only a
//   429 did, and its retry delay has passed) is counted: its limit less what the reports say was
//   used in its current period (counted-windows.ts), resetting as its provider's windows do;
// - a declared window that cannot be counted (no counted report, or a length not counted) has
//   its limit and no remaining.
// Pure.

export interface WindowContext {
  provider: string;
  /** The project's declared limits that apply to this series (its provider, model and pool). */
  declared: readonly Pick<DeclaredLimit, "dimension" | "window" | "limit">[];
  /** What its reports that state no remaining say was used (HotSeries.k). */
  counts: HotCounts | undefined;
  now: number;
}

export function composeWindows(windows: LatestWindow[], ctx: WindowContext): LatestWindow[] {
  const { now } = ctx;
  const declared = new Map(ctx.declared.map((d) => [windowKey(d), d]));
  const out: LatestWindow[] = [];
  const seen = new Set<string>();
  const compose = (stated: LatestWindow | undefined, key: string) => {
    const d = declared.get(key);
    const learned = stated?.learned;
    const limitFrom: { limit: number; source: WindowFiguresSource } | null = learned
      ? { limit: learned.limit, source: "learned" }
      : d
        ? { limit: d.limit, source: "declared" }
        : null;
    const dimension = stated?.dimension ?? (d as { dimension: string }).dimension;
    const window = stated ? stated.window : (d?.window ?? null);
    const live =
      stated !== undefined &&
      stated.remaining !== null &&
      !(stated.resetsAt !== null && now >= stated.resetsAt);
    // The provider states it now: its figures, its limit else the learned or declared one.
    if (live && stated.limit !== null) return keepLearned(stated);
    if (live && limitFrom) return withLimit(stated, limitFrom, learned);
    // Counted: a limit, and no remaining the provider states now (none ever, or a 429's).
    const reset = isCounted(dimension) ? resetKindOf(ctx.provider, window) : null;
    const countable = stated === undefined || stated.limit === null || stated.source === "learned";
    if (limitFrom && reset && countable && ctx.counts && isCounted(dimension)) {
      const use = countedUse(ctx.counts, dimension, window, reset, now);
      return {
        dimension,
        window,
        source: "counted" as const,
        limit: limitFrom.limit,
        remaining: Math.max(0, limitFrom.limit - use.used),
        reportedAt: use.newest ?? now,
        resetsAt: use.resetsAt,
        points: [],
        resets: reset,
        ...(limitFrom.source === "learned" && learned ? { learned } : {}),
      };
    }
    if (stated)
      return limitFrom && stated.limit === null
        ? withLimit(stated, limitFrom, learned)
        : keepLearned(stated);
    return {
      dimension,
      window,
      source: "declared" as const,
      limit: limitFrom?.limit ?? null,
      remaining: null,
      reportedAt: now,
      resetsAt: null,
      points: [],
    };
  };
  for (const w of windows) {
    const key = windowKey(w);
    seen.add(key);
    out.push(compose(w, key));
  }
  for (const [key] of declared) if (!seen.has(key)) out.push(compose(undefined, key));
  return out;
}

/** A stated window as it is; where its limit was learned only when it is the learned one. */
function keepLearned(w: LatestWindow): LatestWindow {
  if (!w.learned || w.source === "learned") return w;
  const { learned: _, ...rest } = w;
  return rest;
}

function withLimit(
  w: LatestWindow,
  from: { limit: number; source: WindowFiguresSource },
  learned: LatestWindow["learned"],
): LatestWindow {
  const { learned: _, ...rest } = w;
  return {
    ...rest,
    limit: from.limit,
    source: from.source,
    ...(from.source === "learned" && learned ? { learned } : {}),
  };
}
