import { clampTime } from "../lib/time-bounds.js";
import type { WindowLength } from "../providers/window.js";
import { type AlertEvent, eventId } from "./alert-event.js";
import { addPoint, type Point } from "./burn-rate.js";
import {
  addCounts,
  countedUse,
  countReport,
  type HotCounts,
  pruneCounts,
} from "./counted-windows.js";
import { windowNow } from "./now-model.js";
import { type AlertRule, metricOfDimension } from "./rule.js";
import { INITIAL, type MachineState, step, type Thresholds } from "./state-machine.js";
import type { Sample, Series } from "./usage.js";

// A rule's samples for one series, in report order, through the state machine. Pure: the same
// state and samples always give the same next state and the same events (ids included).
//
// Time here is the server's (when the edge received each report): order, cooldowns and burn rates
// never follow a client's clock. The watermark (the last sample applied: receive time, then
// report id) makes this idempotent and ordered: a sample at or before it — a row evaluated before
// (a redelivered batch) — changes nothing.

export interface SeriesState {
  m: MachineState;
  /** The last sample applied: [received ms, report id]. */
  seen: [number, string] | null;
  h: Point[];
  /**
   * A counted window's counts (counted-windows.ts), from the reports this rule's series was
   * sampled from: what the hot copy counts of the same reports. Absent for any other window.
   */
  k?: HotCounts;
}

/**
 * A stored state; one written before times were the server's (`wm`, in client time) keeps its
 * level and what was sent, not its times, which a client's clock may have put ahead.
 */
export function readState(text: string): SeriesState {
  const stored = JSON.parse(text) as SeriesState & { wm?: unknown };
  if (stored.seen !== undefined) return stored;
  return { m: { ...stored.m, sentAt: {} }, seen: null, h: [] };
}

export const thresholdsOf = (rule: AlertRule): Thresholds => ({
  warnPct: rule.warn_pct,
  criticalPct: rule.critical_pct,
  hysteresisPct: rule.hysteresis_pct,
  cooldownMs: rule.cooldown_s * 1000,
});

export const compareSamples = (a: Sample, b: Sample) =>
  a.t - b.t || (a.reportId < b.reportId ? -1 : a.reportId > b.reportId ? 1 : 0);

const after = (s: Sample, seen: [number, string] | null) =>
  seen === null || s.t > seen[0] || (s.t === seen[0] && s.reportId > seen[1]);

/** `n` to `digits` decimals; a number too large to scale (1e307 % used) is whole already. */
const round = (n: number, digits: number) => {
  const scaled = n * 10 ** digits;
  return Number.isFinite(scaled) ? Math.round(scaled) / 10 ** digits : n;
};

export function evaluateSeries(
  rule: AlertRule,
  series: Series,
  samples: Sample[],
  prev: SeriesState | null,
  /** The window these samples are of (the rule's metric is its dimension); null: unknown length. */
  window: WindowLength | null = null,
): { next: SeriesState; events: AlertEvent[] } {
  const th = thresholdsOf(rule);
  let state: SeriesState = prev ?? { m: INITIAL, seen: null, h: [] };
  const events: AlertEvent[] = [];
  // The counts are copied before a sample adds to them: `prev` stays as it was (pure).
  let k: HotCounts | undefined = prev?.k ? addCounts({}, prev.k) : undefined;
  for (const sample of [...samples].sort(compareSamples)) {
    if (!after(sample, state.seen)) continue;
    let s = sample;
    if (s.counted) {
      const c = s.counted;
      k ??= {};
      if (c.use) countReport(k, c.use);
      // At the server's time: a report dated ahead must not drop the current buckets.
      pruneCounts(k, s.t);
      const { used, resetsAt } = countedUse(k, c.dimension, c.window, c.resets, c.at);
      const remaining = Math.max(0, s.limit - used);
      s = {
        ...s,
        remaining,
        pct: Math.max(0, ((s.limit - remaining) / s.limit) * 100),
        resetMs: resetsAt === null ? null : resetsAt - c.at,
      };
    }
    const h = addPoint(state.h, [s.t, s.remaining]);
    const { state: m, fire } = step(state.m, s.pct, s.t, th);
    state = { m, seen: [s.t, s.reportId], h, ...(k ? { k } : {}) };
    if (!fire) continue;
    // The model of now, at the sample's own time: the same burn and exhaustion /headroom gives.
    const now = windowNow(
      metricOfDimension(rule.metric),
      {
        limit: s.limit,
        remaining: s.remaining,
        reportedAt: s.t,
        resetsAt: s.resetMs === null ? null : s.t + s.resetMs,
      },
      h,
      s.t,
    );
    events.push({
      id: eventId(rule.id, series, m.seq, s.reportId, window),
      rule_id: rule.id,
      project: rule.project,
      provider: series.provider,
      model: series.model,
      // A pool's event names the member whose report crossed, and the pool.
      app: s.app ?? series.app,
      ...(series.pool ? { pool: series.pool.id, pool_label: series.pool.label } : {}),
      metric: rule.metric,
      dimension: rule.metric,
      window,
      level: fire,
      used_pct: round(s.pct, 2),
      // + 0: a provider's "-0" is 0 in an event (JSON has no -0).
      limit: s.limit + 0,
      remaining: s.remaining + 0,
      reset_ms: s.resetMs,
      burn_per_s: now.burn_per_s,
      exhaustion_eta_s: now.exhaustion_eta_s,
      warn_pct: rule.warn_pct,
      critical_pct: rule.critical_pct,
      report_id: s.reportId,
      at: new Date(clampTime(s.t)).toISOString(),
    });
  }
  return { next: state, events };
}
