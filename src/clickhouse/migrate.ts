import type { ClickHouseClient } from "@clickhouse/client";
import { createDatabase, migrationsTable } from "./cluster-ddl.js";
import type { MigrationContext } from "./migration-context.js";
import { reconcileRetention } from "./retention.js";

// Applying migrations (migrations.ts holds them): what `schema_migrations` lists is skipped, the
// rest runs in order, each recorded once done; then the tables' TTLs follow RETENTION_DAYS.

export interface Migration {
  version: number;
  name: string;
  statements: (ctx: MigrationContext) => string[];
  /**
   * Run once, right after `statements`, when the migration is applied: fills a table added
   * later (a rollup) from what is already stored. Its materialized view sees only inserts
   * that start after it exists, and would count again a batch inserted before the backfill and
   * re-inserted after it: apply such a migration with the workers stopped (SIGTERM).
   */
  backfill?: (ctx: MigrationContext) => string[];
}

/** The versions `schema_migrations` lists, or null when it does not exist yet. */
async function appliedVersions(
  client: ClickHouseClient,
  ctx: MigrationContext,
): Promise<Set<number> | null> {
  // system.tables first: reading the versions must need no DDL and no cluster-wide query.
  const exists = await client.query({
    query: `SELECT 1 FROM system.tables WHERE database = {db:String} AND name = 'schema_migrations'`,
    query_params: { db: ctx.db },
    format: "JSONEachRow",
  });
  if ((await exists.json()).length === 0) return null;
  const rs = await client.query({
    query: `SELECT version FROM ${ctx.db}.schema_migrations FINAL`,
    format: "JSONEachRow",
  });
  return new Set((await rs.json<{ version: number }>()).map((r) => Number(r.version)));
}

/**
 * Applies the migrations not yet applied, then brings the tables' TTLs to RETENTION_DAYS. With
 * the schema current and the TTLs as configured it runs no DDL at all: on a cluster, an
 * `ON CLUSTER` statement waits for every host, and one host down would block the caller.
 */
export async function runMigrations(
  client: ClickHouseClient,
  ctx: MigrationContext,
  migrations: Migration[],
  log: (msg: string) => void,
): Promise<number[]> {
  const done = await appliedVersions(client, ctx);
  const pending = migrations.filter((m) => !done?.has(m.version));
  if (done === null) {
    await client.command({ query: createDatabase(ctx) });
    await client.command({ query: migrationsTable(ctx) });
  }
  const applied: number[] = [];
  for (const m of pending) {
    for (const statement of m.statements(ctx)) await client.command({ query: statement });
    for (const [i, statement] of (m.backfill?.(ctx) ?? []).entries()) {
      // A run interrupted before the version is recorded backfills again: the token drops it.
      await client.command({
        query: statement,
        clickhouse_settings: {
          insert_deduplicate: 1,
          insert_deduplication_token: `migration-${m.version}-backfill-${i}`,
        },
      });
    }
    await client.insert({
      table: `${ctx.db}.schema_migrations`,
      values: [{ version: m.version, name: m.name }],
      format: "JSONEachRow",
    });
    log(`applied migration ${m.version} ${m.name}`);
    applied.push(m.version);
  }
  for (const change of await reconcileRetention(client, ctx)) log(change);
  return applied;
}
