import { createHash } from "node:crypto";
import type { WindowLength } from "../providers/window.js";
import type { AlertRule } from "./rule.js";
import type { Series } from "./usage.js";

// An alert event: what is stored in ClickHouse (`alert_events`) and sent to the rule's webhook.
// Its id is derived from the rule, the series, the transition's number in that series and the
// report that caused it, so evaluating the same rows again yields the same id: ClickHouse keeps
// one row per id, BullMQ one webhook job per id, and receivers can deduplicate on `webhook-id`.

export type EventLevel = "warning" | "critical" | "resolved";

export interface AlertEvent {
  id: string;
  rule_id: string;
  project: string;
  provider: string;
  model: string;
  /** The app whose report moved the series (for a pool, the member that reported). */
  app: string;
  /**
   * The pool the series is (docs/pools.md), when its reports name one: its 12-hex id, as
   * /api/v1/headroom and the exporter name it; absent for an app's own series.
   */
  pool?: string;
  /** The pool's client label (null for a pool by account); absent with `pool`. */
  pool_label?: string | null;
  /** The rule's metric: the dimension it watches (requests, tokens, input_tokens, …). */
  metric: string;
  /**
   * The dimension of the window that moved: the rule's metric (absent from events made before
   * windows had dimensions of their own, read as the metric).
   */
  dimension?: string;
  /** The window of the metric's dimension that moved (its length), or null when unknown. */
  window?: WindowLength | null;
  level: EventLevel;
  used_pct: number;
  limit: number;
  remaining: number;
  reset_ms: number | null;
  burn_per_s: number | null;
  exhaustion_eta_s: number | null;
  warn_pct: number;
  critical_pct: number;
  report_id: string;
  /** The report's timestamp, ISO 8601 UTC with ms. */
  at: string;
}

export function eventId(
  ruleId: string,
  series: Series,
  seq: number,
  reportId: string,
  window: WindowLength | null = null,
): string {
  // A window of unknown length keeps the ids events had before windows; a pool's names the pool
  // (["pool", id], never an app's string), not the member that reported.
  const who = series.pool ? ["pool", series.pool.id] : series.app;
  const parts: unknown[] = [ruleId, series.provider, series.model, who, seq, reportId];
  if (window !== null) parts.push(window);
  const digest = createHash("sha256").update(JSON.stringify(parts)).digest("hex");
  return `evt_${digest.slice(0, 32)}`;
}

/** The fields the webhook body and the `alert_events` row carry as they are, in their order. */
export function eventFigures(e: AlertEvent) {
  return {
    provider: e.provider,
    model: e.model,
    app: e.app,
    metric: e.metric,
    dimension: e.dimension ?? e.metric,
    window: e.window ?? null,
    level: e.level,
    used_pct: e.used_pct,
    limit: e.limit,
    remaining: e.remaining,
    reset_ms: e.reset_ms,
    burn_per_s: e.burn_per_s,
    exhaustion_eta_s: e.exhaustion_eta_s,
    warn_pct: e.warn_pct,
    critical_pct: e.critical_pct,
    report_id: e.report_id,
  };
}

export const EVENT_TYPE = "headroom.alert";
export const TEST_EVENT_TYPE = "headroom.alert.test";

/** The webhook body (Standard Webhooks payload shape: type, timestamp, data). */
export function webhookPayload(e: AlertEvent, type = EVENT_TYPE): string {
  return JSON.stringify({
    type,
    timestamp: e.at,
    data: {
      id: e.id,
      rule_id: e.rule_id,
      project: e.project,
      ...eventFigures(e),
      // The pool, for a pool's event: one event per transition of the pool, whichever member.
      pool: e.pool ?? null,
      pool_label: e.pool_label ?? null,
      // '' in storage means the client did not see the model.
      model: e.model === "" ? null : e.model,
      at: e.at,
    },
  });
}

/** A sample event for `alerts test`: the rule's own figures, marked as a test. */
export function testEvent(rule: AlertRule, now = Date.now()): AlertEvent {
  return {
    id: `evt_test_${now.toString(36)}`,
    rule_id: rule.id,
    project: rule.project,
    provider: rule.provider ?? "openai",
    model: rule.model ?? "",
    app: rule.app ?? "default",
    metric: rule.metric,
    dimension: rule.metric,
    window: rule.window ?? null,
    level: "warning",
    used_pct: rule.warn_pct,
    limit: 100,
    remaining: 100 - rule.warn_pct,
    reset_ms: null,
    burn_per_s: null,
    exhaustion_eta_s: null,
    warn_pct: rule.warn_pct,
    critical_pct: rule.critical_pct,
    report_id: "00000000-0000-0000-0000-000000000000",
    at: new Date(now).toISOString(),
  };
}
