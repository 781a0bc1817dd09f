import type { ClickHouseClient } from "@clickhouse/client";
import { exactInsertSettings } from "../clickhouse/report-sink.js";
import type { AlertEvent } from "./alert-event.js";

// Events into ClickHouse `alert_events`. A batch's events are inserted with a deduplication token
// derived from the batch, and the same rows every time (they come from the outbox): a repeated
// insert is dropped; the table (ReplacingMergeTree by event id) and its view keep one row anyway.
// On a cluster the insert goes through the Distributed table in the foreground, as reports do.

/** ISO `2024-05-01T10:00:00.123Z` → ClickHouse DateTime64(3) text. */
const chTime = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;

export interface EventSink {
  insert(events: AlertEvent[], dedupToken: string): Promise<void>;
}

export function createEventSink(client: ClickHouseClient, db: string, cluster?: string): EventSink {
  return {
    async insert(events, dedupToken) {
      if (events.length === 0) return;
      await client.insert({
        table: `${db}.alert_events`,
        format: "JSONEachRow",
        values: events.map((e) => ({
          event_id: e.id,
          rule_id: e.rule_id,
          project_id: e.project,
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
          at: chTime(e.at),
        })),
        clickhouse_settings: exactInsertSettings(`alerts-${dedupToken}`, cluster),
      });
    },
  };
}
