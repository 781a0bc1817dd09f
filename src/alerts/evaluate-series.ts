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
import {
  INITIAL,
  type MachineState,
  step,
  type Thresholds,
  type Transition,
} from "./state-machine.js";
import type { CountedSample, LearnedLimit, Sample, Series } from "./usage.js";

// A rule's samples for one series, in report order, through the state machine. Pure: the same
// state and samples always give the same next state and the same events (ids included).
//
// Time here is the server's (when the edge received each report): order, cooldowns and burn rates
// never follow a client's clock. The watermark (the last sample applied: receive time, then
// report id) makes this idempotent and ordered: a sample at or before it — a row evaluated before
// (a redelivered batch) — changes nothing, except a counted one of a batch the caller knows was
// never applied (`late`: a batch evaluated after a later one), whose use is added to the counts
// once (the state store marks the batch applied with its states).

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
  /**
   * The newest limit a 429 taught for this window (a Gemini quota), and until when that 429 said
   * the window is used up: later reports that state nothing are counted against it.
   */
  lw?: LearnedLimit;
}

/** Counted samples of a batch never applied before, received after `since`, are counted. */
export interface LateCounting {
  since: number;
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
  /** Set when the batch was never applied: its counted samples before the watermark count. */
  late: LateCounting | null = null,
): { next: SeriesState; events: AlertEvent[] } {
  const th = thresholdsOf(rule);
  let state: SeriesState = prev ?? { m: INITIAL, seen: null, h: [] };
  const events: AlertEvent[] = [];
  // The counts are copied before a sample adds to them: `prev` stays as it was (pure).
  let k: HotCounts | undefined = prev?.k ? addCounts({}, prev.k) : undefined;
  let lw = prev?.lw;
  /** A late sample counted and not yet followed by one in order: stepped at the end. */
  let pending: Sample | null = null;
  const learnFrom = (s: Sample) => {
    const l = s.learned;
    if (l && (!lw || l.at > lw.at || (l.at === lw.at && l.reportId > lw.reportId))) lw = l;
  };
  /** A counted sample's figures from the counts at `at` (report time); null: it counts nothing. */
  const figuresOf = (s: Sample, at: number): Sample | null => {
    const c = s.counted;
    if (!c) return s;
    // A limit learned from a 429 comes before a declared one (window-figures.ts).
    const limit = lw?.limit ?? (c.ifLearned ? null : s.limit);
    if (limit === null || !(limit > 0)) return null;
    const { used, resetsAt } = countedUse(k, c.dimension, c.window, c.resets, at);
    // Within the retry delay of the 429 that taught it, the window is used up (as /headroom says).
    const exhausted = lw?.until != null && at < lw.until;
    const remaining = exhausted ? 0 : Math.max(0, limit - used);
    return {
      ...s,
      limit,
      remaining,
      pct: Math.max(0, ((limit - remaining) / limit) * 100),
      resetMs: resetsAt === null ? null : resetsAt - at,
    };
  };
  const count = (s: Sample, t: number) => {
    const c = s.counted as CountedSample;
    k ??= {};
    if (c.use) countReport(k, c.use);
    // At the server's time: a report dated ahead must not drop the current buckets.
    pruneCounts(k, t);
  };
  const apply = (s: Sample, seen: [number, string] | null) => {
    const h = addPoint(state.h, [s.t, s.remaining]);
    const { state: m, fire } = step(state.m, s.pct, s.t, th);
    state = { m, seen, h, ...(k ? { k } : {}), ...(lw ? { lw } : {}) };
    if (fire) events.push(eventOf(rule, series, window, s, m.seq, fire, h));
  };
  for (const sample of [...samples].sort(compareSamples)) {
    if (!after(sample, state.seen)) {
      // Learning is idempotent (the newest limit wins); counting is not.
      learnFrom(sample);
      // A counted report of a batch evaluated after a later one: its use counts, once.
      if (!late || !sample.counted || sample.t <= late.since) continue;
      if (sample.counted.ifLearned && !lw) continue;
      count(sample, state.seen?.[0] ?? sample.t);
      pending = sample;
      continue;
    }
    learnFrom(sample);
    // Counted only against a learned limit, and none was learned: nothing to say.
    if (sample.counted?.ifLearned && !lw) continue;
    if (sample.counted) count(sample, sample.t);
    const s = figuresOf(sample, sample.counted?.at ?? sample.t);
    if (s === null) continue;
    pending = null;
    apply(s, [s.t, s.reportId]);
  }
  if (pending && state.seen) {
    // At the watermark's time, against the newest period the counts hold.
    const at = Math.max(pending.counted?.at ?? 0, newestCounted(k));
    const s = figuresOf({ ...pending, t: state.seen[0] }, at);
    if (s) apply(s, state.seen);
  }
  return { next: { ...state, ...(k ? { k } : {}), ...(lw ? { lw } : {}) }, events };
}

/** The newest report timestamp counted, Unix ms (0: none). */
function newestCounted(k: HotCounts | undefined): number {
  let newest = 0;
  for (const b of Object.values(k ?? {})) if (Array.isArray(b)) newest = Math.max(newest, b[4]);
  return newest;
}

function eventOf(
  rule: AlertRule,
  series: Series,
  window: WindowLength | null,
  s: Sample,
  seq: number,
  fire: Transition,
  h: Point[],
): AlertEvent {
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
  return {
    id: eventId(rule.id, series, seq, s.reportId, window),
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
  };
}
