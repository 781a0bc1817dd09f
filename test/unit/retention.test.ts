import { describe, expect, it } from "vitest";
import { RETENTION_TABLES, retentionStatements } from "../../src/clickhouse/retention.js";

// What `migrate` runs to bring a table to RETENTION_DAYS, from the table's engine_full as
// ClickHouse shows it. (test/integration/clickhouse-retention.test.ts runs it on the engine.)

const reports = RETENTION_TABLES.find((t) => t.name === "reports");
const latest = RETENTION_TABLES.find((t) => t.name === "latest_limits");
const shown = (ttl: string, settings: string) =>
  `ReplacingMergeTree PARTITION BY toYYYYMM(received_at) ORDER BY (project_id, report_id) ${ttl}SETTINGS ${settings}, index_granularity = 8192`;
const single = { db: "hr", retentionDays: 30 };

describe("retention statements", () => {
  if (!reports || !latest) throw new Error("tables missing");

  it("none when the TTL and the part dropping are as configured", () => {
    const engine = shown(
      "TTL toDateTime(received_at) + toIntervalDay(30) ",
      "non_replicated_deduplication_window = 100000, ttl_only_drop_parts = 1",
    );
    expect(retentionStatements(single, reports, engine)).toEqual([]);
  });

  it("modifies the TTL when the days differ, including a prefix of them (300 vs 30)", () => {
    const engine = shown(
      "TTL toDateTime(received_at) + toIntervalDay(300) ",
      "ttl_only_drop_parts = 1",
    );
    expect(retentionStatements(single, reports, engine)).toEqual([
      "ALTER TABLE hr.reports MODIFY TTL toDateTime(received_at) + INTERVAL 30 DAY",
    ]);
  });

  it("turns on whole-part expiry, and adds a TTL where there is none, on the stored table", () => {
    const engine = "AggregatingMergeTree ORDER BY (project_id) SETTINGS index_granularity = 8192";
    expect(retentionStatements({ ...single, cluster: "eu" }, latest, engine)).toEqual([
      "ALTER TABLE hr.latest_limits_local ON CLUSTER 'eu' MODIFY TTL toDateTime(last_seen) + INTERVAL 30 DAY",
    ]);
    expect(retentionStatements(single, reports, shown("", "x = 1"))).toEqual([
      "ALTER TABLE hr.reports MODIFY SETTING ttl_only_drop_parts = 1",
      "ALTER TABLE hr.reports MODIFY TTL toDateTime(received_at) + INTERVAL 30 DAY",
    ]);
  });
});
