import type { ClickHouseClient } from "@clickhouse/client";
import { onCluster, stored } from "./cluster-ddl.js";
import type { MigrationContext } from "./migration-context.js";

// RETENTION_DAYS is a setting, not part of a migration: `migrate` brings every table's TTL to it
// whenever it changes, on tables created long before.
//
// Each table expires by the time it is partitioned by, so that with `ttl_only_drop_parts` a month
// of rows leaves as whole parts (no part is rewritten to delete rows): `reports` by when the edge
// received each report, the rollups by their bucket and `alert_events` by `at` (both the
// client's timestamp). `latest_limits` has no partitions: a series not seen for the retention is deleted
// row by row in its merges, and it is small.

export interface RetentionTable {
  name: string;
  /** The DateTime64/Date column whose age expires a row. */
  column: string;
  /** Expire whole parts only: right for tables partitioned by month of `column`. */
  dropParts: boolean;
}

export const RETENTION_TABLES: RetentionTable[] = [
  { name: "reports", column: "received_at", dropParts: true },
  { name: "reports_minute", column: "bucket", dropParts: true },
  { name: "reports_daily", column: "bucket", dropParts: true },
  { name: "report_windows_minute", column: "bucket", dropParts: true },
  { name: "report_windows_daily", column: "bucket", dropParts: true },
  { name: "report_pools_minute", column: "bucket", dropParts: true },
  { name: "report_pools_daily", column: "bucket", dropParts: true },
  { name: "alert_events", column: "at", dropParts: true },
  { name: "latest_limits", column: "last_seen", dropParts: false },
];

const ttlOf = (t: RetentionTable, days: number) => `toDateTime(${t.column}) + INTERVAL ${days} DAY`;
/** The same expression as ClickHouse shows it in system.tables.engine_full. */
const shownTtl = (t: RetentionTable, days: number) =>
  `TTL toDateTime(${t.column}) + toIntervalDay(${days})`;

/** The statements that bring one table to the retention, given its engine_full; [] if it is. */
export function retentionStatements(
  ctx: MigrationContext,
  table: RetentionTable,
  engineFull: string,
): string[] {
  const statements: string[] = [];
  const name = `${stored(ctx, table.name)}${onCluster(ctx)}`;
  if (table.dropParts && !/\bttl_only_drop_parts = 1\b/.test(engineFull)) {
    statements.push(`ALTER TABLE ${name} MODIFY SETTING ttl_only_drop_parts = 1`);
  }
  const shown = shownTtl(table, ctx.retentionDays);
  const at = engineFull.indexOf(shown);
  const next = engineFull[at + shown.length];
  if (at < 0 || (next !== undefined && next !== " ")) {
    statements.push(`ALTER TABLE ${name} MODIFY TTL ${ttlOf(table, ctx.retentionDays)}`);
  }
  return statements;
}

/** Brings every table's TTL to the retention; returns what it changed, one line each. */
export async function reconcileRetention(
  client: ClickHouseClient,
  ctx: MigrationContext,
): Promise<string[]> {
  const rs = await client.query({
    query: `SELECT name, engine_full FROM system.tables WHERE database = {db:String}`,
    query_params: { db: ctx.db },
    format: "JSONEachRow",
  });
  const engines = new Map(
    (await rs.json<{ name: string; engine_full: string }>()).map((r) => [r.name, r.engine_full]),
  );
  const changes: string[] = [];
  for (const table of RETENTION_TABLES) {
    const storedName = stored(ctx, table.name).slice(ctx.db.length + 1);
    const engineFull = engines.get(storedName);
    if (engineFull === undefined) continue;
    for (const query of retentionStatements(ctx, table, engineFull)) {
      // Existing parts keep their old TTL until they merge: no rewrite of the whole table now.
      await client.command({ query, clickhouse_settings: { materialize_ttl_after_modify: 0 } });
      changes.push(`retention: ${query}`);
    }
  }
  return changes;
}
