import { addPoint, burnPerSecond, exhaustionEtaS, type Point } from "../alerts/burn-rate.js";
import type { AlertRule, Metric } from "../alerts/rule.js";
import { levelFor, type Thresholds } from "../alerts/state-machine.js";

// The current headroom of one series (provider, model, app), from its latest figures and its
// recent points: what /api/v1/headroom answers. Pure. The burn rate and the time to exhaustion
// are the alerts' own (burn-rate.ts); the status uses the alerts' thresholds (state-machine.ts).

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
}

/** Recent points of a series per metric, oldest first: [Unix ms, remaining]. */
export type RecentPoints = Record<Metric, Point[]>;

export interface MetricView {
  limit: number | null;
  remaining: number | null;
  used_pct: number | null;
  /** When the provider's window resets (absolute); null for credits and when unknown. */
  resets_at: string | null;
  burn_per_s: number | null;
  exhaustion_eta_s: number | null;
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
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function usedPct(limit: number | null, remaining: number | null): number | null {
  if (limit === null || remaining === null || !(limit > 0)) return null;
  return round(Math.max(0, ((limit - remaining) / limit) * 100), 2);
}

function metricView(
  fig: { limit: number | null; remaining: number | null; resetMs?: number | null },
  reportedAt: number | null,
  points: Point[],
  now: number,
): MetricView {
  const resetsAt =
    fig.resetMs !== null && fig.resetMs !== undefined && reportedAt !== null
      ? reportedAt + fig.resetMs
      : null;
  // The same history the alerts keep: a rise in `remaining` starts it again.
  let history: Point[] = [];
  for (const p of points) history = addPoint(history, p);
  const burn = burnPerSecond(history);
  const untilReset = resetsAt === null ? null : Math.max(0, resetsAt - now);
  return {
    limit: fig.limit,
    remaining: fig.remaining,
    used_pct: usedPct(fig.limit, fig.remaining),
    resets_at: iso(resetsAt),
    burn_per_s: burn === null ? null : round(burn, 4),
    exhaustion_eta_s:
      fig.remaining === null ? null : exhaustionEtaS(fig.remaining, burn, untilReset),
  };
}

/** The strictest thresholds of the rules watching this series and metric, else the defaults. */
export function thresholdsFor(
  rules: AlertRule[],
  series: { provider: string; model: string; app: string },
  metric: Metric,
): Pick<Thresholds, "warnPct" | "criticalPct"> {
  const watching = rules.filter(
    (r) =>
      r.metric === metric &&
      (r.provider === null || r.provider === series.provider) &&
      (r.model === null || r.model === series.model) &&
      (r.app === null || r.app === series.app),
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
  opts: { now: number; staleAfterMs: number },
): SeriesView {
  const { now } = opts;
  const metrics = {
    requests: metricView(latest.requests, latest.limitsAt, points.requests, now),
    tokens: metricView(latest.tokens, latest.limitsAt, points.tokens, now),
    credits: metricView(latest.credits, latest.creditsAt, points.credits, now),
  };
  let status: Status = "ok";
  if (now - latest.lastSeen > opts.staleAfterMs) status = "stale";
  else {
    for (const metric of ["requests", "tokens", "credits"] as const) {
      const pct = metrics[metric].used_pct;
      if (pct === null) continue;
      const th = thresholdsFor(rules, latest, metric);
      const level = levelFor("ok", pct, { ...th, hysteresisPct: 0, cooldownMs: 0 });
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
    last_seen: new Date(latest.lastSeen).toISOString(),
    reported_at: iso(latest.limitsAt),
    credits_reported_at: iso(latest.creditsAt),
    ...metrics,
  };
}
