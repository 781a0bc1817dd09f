import type { Point } from "../alerts/burn-rate.js";
import { type WindowNow, windowNow } from "../alerts/now-model.js";
import { type AlertRule, type Metric, metricOfDimension } from "../alerts/rule.js";
import { levelFor, type Thresholds } from "../alerts/state-machine.js";
import { clampTime, isoOrNull, isoText, isResetDelay } from "../lib/time-bounds.js";
import type { WindowFiguresSource, WindowLength } from "../providers/window.js";
import type { HotCounts, ResetKind } from "../alerts/counted-windows.js";
import { type PoolMark, withPoolMark } from "./exhaustion.js";
import type { LatestWindow } from "../alerts/latest-window.js";
import { composeWindows, type WindowContext } from "../alerts/window-figures.js";

// The current headroom of one series (provider, model, app), from its latest figures and its
// recent points: what /api/v1/headroom answers. Pure. Each window is read through the model of
// "now" (now-model.ts); the status uses the alerts' thresholds (state-machine.ts), and a window
// that has reset since its last report counts for none. A series lists its windows (dimension and
// length: src/providers/window.ts), each through the same model; its status is its worst
// window's. The per-metric views (requests, tokens, credits) stay for the readers that know only
// them: the contract's six fields, else (they say nothing of requests or tokens) the most used
// window of that metric, saying which and where its figures come from.

export const STATUSES = ["ok", "warning", "critical", "stale"] as const;
export type Status = (typeof STATUSES)[number];

/** Thresholds when no alert rule of the project watches a series. */
export const DEFAULT_THRESHOLDS = { warnPct: 70, criticalPct: 90 } as const;

export interface LatestFigures {
  provider: string;
  model: string;
  app: string;
  lastSeen: number;
  limitsAt: number | null;
  creditsAt: number | null;
  requests: { limit: number | null; remaining: number | null; resetMs: number | null };
  tokens: { limit: number | null; remaining: number | null; resetMs: number | null };
  credits: { limit: number | null; remaining: number | null };
  /** A pool's member apps (pool-view.ts): a rule on any of them watches the pool. */
  apps?: string[];
  /** The series' windows, each with its own newest figures and recent points (none: a copy kept before windows). */
  windows?: LatestWindow[];
  /** The newest rate limit that named no window: the pool is exhausted (exhaustion.ts). */
  exhausted?: PoolMark;
  /** The newest time of a report that was no rate limit (null: none kept). */
  okAt?: number | null;
  /** What its reports that state no remaining say was used (counted-windows.ts). */
  counts?: HotCounts;
}

export type { LatestWindow } from "../alerts/latest-window.js";

/** A window at the answer's `at`: which one, when it was reported, and the model of now. */
export interface WindowView extends WindowNow {
  dimension: string;
  window: WindowLength | null;
  source: WindowFiguresSource;
  /** Where its limit was learned (a limit error's report), when it was; else null. */
  learned_from: { report_id: string; at: string } | null;
  /** How a counted window resets (counted-windows.ts); null for the others (`resets_at` says). */
  resets: ResetKind | null;
  reported_at: string;
}

/** Recent points of a series per metric, oldest first: [Unix ms, remaining]. */
export type RecentPoints = Record<Metric, Point[]>;

/**
 * A metric's window at the answer's `at` (now-model.ts). Taken from one of the series' windows
 * (the contract's fields say nothing of it), it says which and where its figures come from.
 */
export interface MetricView extends WindowNow {
  source?: WindowFiguresSource;
  dimension?: string;
  window?: WindowLength | null;
}

export interface SeriesView {
  provider: string;
  model: string | null;
  app: string;
  status: Status;
  last_seen: string;
  reported_at: string | null;
  credits_reported_at: string | null;
  requests: MetricView;
  tokens: MetricView;
  credits: MetricView;
  /** Always set by seriesView; optional for callers that build views by hand. */
  windows?: WindowView[];
}

const iso = isoOrNull;
/** A time every answer has (when it was reported or seen): within the range, never a throw. */
const isoAlways = (ms: number) => isoText(clampTime(ms));

function metricView(
  metric: Metric,
  fig: { limit: number | null; remaining: number | null; resetMs?: number | null },
  reportedAt: number | null,
  points: Point[],
  now: number,
): MetricView {
  // A reset delay past the edge's bound (a row stored before it) is no reset.
  const resetsAt =
    isResetDelay(fig.resetMs) && reportedAt !== null ? reportedAt + fig.resetMs : null;
  return windowNow(
    metric,
    { limit: fig.limit, remaining: fig.remaining, reportedAt, resetsAt },
    points,
    now,
  );
}

function windowView(w: LatestWindow, now: number): WindowView {
  const fig = {
    limit: w.limit,
    remaining: w.remaining,
    reportedAt: w.reportedAt,
    resetsAt: w.resetsAt,
  };
  return {
    dimension: w.dimension,
    window: w.window,
    source: w.source ?? "stated",
    learned_from: w.learned ? { report_id: w.learned.reportId, at: isoAlways(w.learned.at) } : null,
    resets: w.resets ?? null,
    reported_at: isoAlways(w.reportedAt),
    ...windowNow(metricOfDimension(w.dimension), fig, w.points, now),
  };
}

/** How used a window is, for the headline: a reset one least, one used up without a limit fully. */
const usedRank = (w: WindowView) =>
  w.reset_since_report ? -2 : (w.used_pct ?? (w.remaining !== null && w.remaining <= 0 ? 100 : -1));

/**
 * A metric's headline: the contract's figures, or when they say nothing, its most used window
 * (the first of equals), with which window it is and where its figures come from.
 */
export function headlineOf(metric: Metric, own: MetricView, windows: WindowView[]): MetricView {
  if (own.limit !== null || own.remaining !== null) return own;
  let worst: WindowView | undefined;
  for (const w of windows) {
    if (metricOfDimension(w.dimension) !== metric) continue;
    if (w.limit === null && w.remaining === null) continue;
    if (!worst || usedRank(w) > usedRank(worst)) worst = w;
  }
  if (!worst) return own;
  const { learned_from: _l, resets: _r, reported_at: _at, ...view } = worst;
  return view;
}

/**
 * The strictest thresholds of the rules watching this series and metric (a dimension), else the
 * defaults; with `window`, only rules that watch every window or that length.
 */
export function thresholdsFor(
  rules: AlertRule[],
  series: { provider: string; model: string; app: string; apps?: string[] },
  metric: string,
  window?: WindowLength | null,
): Pick<Thresholds, "warnPct" | "criticalPct"> {
  const watching = rules.filter(
    (r) =>
      r.metric === metric &&
      (window === undefined || r.window == null || r.window === window) &&
      (r.provider === null || r.provider === series.provider) &&
      (r.model === null || r.model === series.model) &&
      (r.app === null || (series.apps ?? [series.app]).includes(r.app)),
  );
  if (watching.length === 0) return DEFAULT_THRESHOLDS;
  return {
    warnPct: Math.min(...watching.map((r) => r.warn_pct)),
    criticalPct: Math.min(...watching.map((r) => r.critical_pct)),
  };
}

export function seriesView(
  latest: LatestFigures,
  points: RecentPoints,
  rules: AlertRule[],
  opts: {
    now: number;
    staleAfterMs: number;
    /** The project's declared limits that apply to this series (or pool). */
    declared?: WindowContext["declared"];
  },
): SeriesView & { windows: WindowView[] } {
  const { now } = opts;
  const metrics = {
    requests: metricView("requests", latest.requests, latest.limitsAt, points.requests, now),
    tokens: metricView("tokens", latest.tokens, latest.limitsAt, points.tokens, now),
    credits: metricView("credits", latest.credits, latest.creditsAt, points.credits, now),
  };
  const composed = composeWindows(latest.windows ?? [], {
    provider: latest.provider,
    declared: opts.declared ?? [],
    counts: latest.counts,
    now,
  });
  const windows = withPoolMark(composed, latest.exhausted, latest.okAt ?? null, now).map((w) =>
    windowView(w, now),
  );
  const headline = {
    requests: headlineOf("requests", metrics.requests, windows),
    tokens: headlineOf("tokens", metrics.tokens, windows),
  };
  // The worst window's status; a copy kept before windows were (none yet) reads the metrics.
  const watched =
    windows.length > 0
      ? windows.map((w) => ({ view: w as MetricView, metric: w.dimension, window: w.window }))
      : (["requests", "tokens", "credits"] as const).map((m) => ({
          view: metrics[m],
          metric: m,
          window: undefined,
        }));
  let status: Status = "ok";
  if (!(now - latest.lastSeen <= opts.staleAfterMs)) status = "stale";
  else {
    for (const { view, metric, window } of watched) {
      // A window at 0 remaining is used up, whether or not its limit is known (a 429's).
      const pct = view.used_pct ?? (view.remaining !== null && view.remaining <= 0 ? 100 : null);
      if (pct === null || view.reset_since_report) continue;
      const th = thresholdsFor(rules, latest, metric, window);
      const level = levelFor("ok", pct, {
        warnPct: th.warnPct,
        criticalPct: th.criticalPct,
        hysteresisPct: 0,
        cooldownMs: 0,
      });
      if (level === "critical") status = "critical";
      else if (level === "warning" && status === "ok") status = "warning";
    }
  }
  return {
    provider: latest.provider,
    // '' in storage: the client could not see the model.
    model: latest.model === "" ? null : latest.model,
    app: latest.app,
    status,
    last_seen: isoAlways(latest.lastSeen),
    reported_at: iso(latest.limitsAt),
    credits_reported_at: iso(latest.creditsAt),
    ...metrics,
    ...headline,
    windows,
  };
}
