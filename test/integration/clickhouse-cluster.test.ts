import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClickHouseClient } from "@clickhouse/client";
import { drainPending, Session } from "chdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import type { AlertEvent } from "../../src/alerts/alert-event.js";
import { createEventSink } from "../../src/alerts/event-sink.js";
import { createClickHouse } from "../../src/clickhouse/client.js";
import { createDatabase, migrationsTable } from "../../src/clickhouse/cluster-ddl.js";
import { MIGRATIONS, type MigrationContext, migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { RETENTION_TABLES, retentionStatements } from "../../src/clickhouse/retention.js";
import { reportIdOf } from "../../src/report/report-schema.js";

// What the embedded engine (chdb: ClickHouse 26 in this process) can check of the cluster schema
// without a cluster, given a server config with clusters and the {shard}/{replica} macros:
// - it parses every statement with its ON CLUSTER clause, but refuses to run one ("Replicated
//   DDL queries are disabled": it has no distributed DDL queue), so here each statement runs as
//   ClickHouse runs it on each host, without the clause;
// - it creates the Replicated tables, macros expanded, but never starts their replication (no
//   Keeper): they stay read-only and an insert into them would wait forever;
// - Distributed tables work, over shards that are this host. The insert path runs through them on
//   the same schema with the non-replicated engine of each table's family.

const dir = mkdtempSync(join(tmpdir(), "headroom-ch-cluster-"));
/** One shard: this host. */
const ONE = "headroom_one";
/** Two shards that are both this host, so they share its tables (and deduplication logs). */
const SHARED = "headroom_shared";
const replica = (host: string) =>
  `<replica><host>${host}</host><port>9000</port></replica><internal_replication>true</internal_replication>`;
const CONFIG = `<clickhouse>
  <!-- A cluster replica at this host and port is this process (system.clusters.is_local). -->
  <tcp_port>9000</tcp_port>
  <remote_servers>
    <${ONE}><shard>${replica("127.0.0.1")}</shard></${ONE}>
    <${SHARED}><shard>${replica("127.0.0.1")}</shard><shard>${replica("localhost")}</shard></${SHARED}>
  </remote_servers>
  <macros><shard>01</shard><replica>r1</replica></macros>
  <zookeeper><implementation>testkeeper</implementation></zookeeper>
</clickhouse>`;

const name = (what: string) => `t_${what}_${randomBytes(4).toString("hex")}`;
const replicated = { db: name("replicated"), cluster: ONE, retentionDays: 30 };
const unreplicated = { db: name("unreplicated"), cluster: ONE, retentionDays: 30 };
const shared = { db: name("shared"), cluster: SHARED, retentionDays: 30 };

/** Every statement `headroom migrate` runs on an empty database, in order. */
const schema = (ctx: MigrationContext) => [
  createDatabase(ctx),
  migrationsTable(ctx),
  ...MIGRATIONS.flatMap((m) => m.statements(ctx)),
];
/** A statement as ClickHouse runs it on each host of the cluster. */
const onEachHost = (statement: string) => statement.replace(/ ON CLUSTER '[^']+'/, "");
/** The same table without Keeper: the family's plain engine, the same deduplication window. */
const withoutKeeper = (statement: string) =>
  statement
    .replace(/ENGINE = Replicated(\w+)\('[^']*', '[^']*'\)/, "ENGINE = $1")
    .replace(
      /replicated_deduplication_window = (\d+), replicated_deduplication_window_seconds = \d+/,
      "non_replicated_deduplication_window = $1",
    );

let session: Session;
let client: ClickHouseClient;

async function rows<T>(query: string, params: Record<string, unknown> = {}): Promise<T[]> {
  const rs = await client.query({ query, query_params: params, format: "JSONEachRow" });
  return rs.json<T>();
}

beforeAll(async () => {
  const config = join(dir, "config.xml");
  writeFileSync(config, CONFIG);
  const path = join(dir, "data");
  // The engine of this process starts with the config; the client's connection shares it.
  session = new Session(path, { connectionArgs: [`--config-file=${config}`] });
  client = createClickHouse({
    CLICKHOUSE_PATH: path,
    CLICKHOUSE_USER: "default",
    CLICKHOUSE_PASSWORD: "",
    CLICKHOUSE_DATABASE: replicated.db,
    CLICKHOUSE_REQUEST_TIMEOUT_MS: 60_000,
  });
  // ALTERs need the replication that never starts here (TABLE_IS_READ_ONLY): parsed only. So are
  // the statements that read a column such an ALTER adds (a view made again to show it): they
  // run in the two databases below.
  const added = new Set<string>();
  for (const statement of schema(replicated)) {
    if (statement.startsWith("ALTER")) {
      for (const m of statement.matchAll(/ADD COLUMN IF NOT EXISTS `?(\w+)/g))
        added.add(m[1] as string);
      continue;
    }
    // A table made with its own columns reads none (its names may be an added column's).
    if (
      !statement.startsWith("CREATE TABLE") &&
      [...added].some((c) => new RegExp(`\\b${c}\\b`).test(statement))
    )
      continue;
    await client.command({ query: onEachHost(statement) });
  }
  for (const statement of schema(unreplicated)) {
    await client.command({ query: withoutKeeper(onEachHost(statement)) });
  }
  for (const statement of schema(shared)) {
    await client.command({ query: withoutKeeper(onEachHost(statement)) });
  }
});

afterAll(async () => {
  // The engine cannot shut a read-only replicated table down; dropped, it has nothing to stop.
  for (const { db } of [replicated, unreplicated, shared]) {
    await client?.command({ query: `DROP DATABASE IF EXISTS ${db} SYNC` });
  }
  await client?.close();
  session?.close();
  await drainPending();
  rmSync(dir, { recursive: true, force: true });
});

describe("cluster DDL on the embedded engine", () => {
  it("parses every statement with ON CLUSTER after the name it creates or alters", async () => {
    for (const statement of schema(replicated)) {
      const [parsed] = await rows<{ f: string }>("SELECT formatQuerySingleLine({q:String}) AS f", {
        q: statement,
      });
      // ClickHouse's own rendering of the parsed statement.
      expect(parsed?.f).toMatch(
        new RegExp(
          `^(CREATE (DATABASE|TABLE|MATERIALIZED VIEW|VIEW) IF NOT EXISTS|CREATE OR REPLACE VIEW|ALTER TABLE) ${replicated.db}(\\.\\w+)? ON CLUSTER ${ONE}( |$)`,
        ),
      );
    }
  });

  it("refuses to run ON CLUSTER itself: it has no distributed DDL queue", async () => {
    await expect(client.command({ query: createDatabase(replicated) })).rejects.toThrow(
      /Replicated DDL queries are disabled/,
    );
  });

  it("creates the replicated tables with each shard's path and this host's replica name", async () => {
    const replicas = await rows<{ table: string; zookeeper_path: string; replica_name: string }>(
      `SELECT table, zookeeper_path, replica_name FROM system.replicas
       WHERE database = {db:String} ORDER BY table`,
      { db: replicated.db },
    );
    const path = (table: string) => `/clickhouse/tables/01/${replicated.db}/${table}`;
    expect(replicas).toEqual([
      {
        table: "alert_events_local",
        zookeeper_path: path("alert_events_local"),
        replica_name: "r1",
      },
      {
        table: "latest_limits_local",
        zookeeper_path: path("latest_limits_local"),
        replica_name: "r1",
      },
      {
        table: "report_pools_daily_local",
        zookeeper_path: path("report_pools_daily_local"),
        replica_name: "r1",
      },
      {
        table: "report_pools_minute_local",
        zookeeper_path: path("report_pools_minute_local"),
        replica_name: "r1",
      },
      {
        table: "report_windows_daily_local",
        zookeeper_path: path("report_windows_daily_local"),
        replica_name: "r1",
      },
      {
        table: "report_windows_minute_local",
        zookeeper_path: path("report_windows_minute_local"),
        replica_name: "r1",
      },
      {
        table: "reports_daily_local",
        zookeeper_path: path("reports_daily_local"),
        replica_name: "r1",
      },
      { table: "reports_local", zookeeper_path: path("reports_local"), replica_name: "r1" },
      {
        table: "reports_minute_local",
        zookeeper_path: path("reports_minute_local"),
        replica_name: "r1",
      },
      {
        table: "schema_migrations",
        zookeeper_path: `/clickhouse/tables/${replicated.db}/schema_migrations`,
        replica_name: "01-r1",
      },
    ]);
  });

  it("puts Distributed tables under the public names, over the local tables", async () => {
    const tables = await rows<{ name: string; engine_full: string }>(
      `SELECT name, engine_full FROM system.tables
       WHERE database = {db:String} AND engine = 'Distributed' ORDER BY name`,
      { db: replicated.db },
    );
    const over = (table: string, key = "") =>
      `Distributed('${ONE}', '${replicated.db}', '${table}_local'${key ? `, ${key}` : ""})`;
    expect(tables).toEqual([
      { name: "alert_events", engine_full: over("alert_events", "cityHash64(event_id)") },
      { name: "latest_limits", engine_full: over("latest_limits") },
      { name: "report_pools_daily", engine_full: over("report_pools_daily") },
      { name: "report_pools_minute", engine_full: over("report_pools_minute") },
      {
        name: "report_windows_daily",
        engine_full: over("report_windows_daily", "cityHash64(project_id)"),
      },
      {
        name: "report_windows_minute",
        engine_full: over("report_windows_minute", "cityHash64(project_id)"),
      },
      { name: "reports", engine_full: over("reports", "cityHash64(report_id)") },
      { name: "reports_daily", engine_full: over("reports_daily") },
      { name: "reports_minute", engine_full: over("reports_minute") },
    ]);
  });

  it("hangs the materialized views on the local reports table, writing local tables", async () => {
    const [source] = await rows<{ mvs: string[] }>(
      `SELECT arraySort(dependencies_table) AS mvs FROM system.tables
       WHERE database = {db:String} AND name = 'reports_local'`,
      { db: replicated.db },
    );
    expect(source?.mvs).toEqual(["latest_limits_mv", "reports_daily_mv", "reports_minute_mv"]);
    const mvs = await rows<{ name: string; create_table_query: string }>(
      `SELECT name, create_table_query FROM system.tables
       WHERE database = {db:String} AND engine = 'MaterializedView' ORDER BY name`,
      { db: replicated.db },
    );
    for (const mv of mvs) {
      const target = `${replicated.db}.${mv.name.replace(/_mv$/, "_local")}`;
      expect(mv.create_table_query).toContain(` TO ${target} `);
    }
  });

  it("answers every analyst view through the Distributed tables", async () => {
    for (const view of [
      "reports_v",
      "reports_minute_v",
      "reports_daily_v",
      "latest_limits_v",
      "alert_events_v",
    ]) {
      const [r] = await rows<{ n: string }>(`SELECT count() AS n FROM ${replicated.db}.${view}`);
      expect(Number(r?.n), view).toBe(0);
    }
    expect(await rows(`SELECT version FROM ${replicated.db}.schema_migrations FINAL`)).toEqual([]);
  });
});

describe("inserts through the Distributed tables", () => {
  const project = name("project");
  const batch = Array.from({ length: 40 }, (_, i) => sampleRow(i, project));
  const count = async (db: string, table: string, expr = "count()") =>
    Number((await rows<{ n: string }>(`SELECT ${expr} AS n FROM ${db}.${table}`))[0]?.n);

  it("a batch inserted again with its token is stored once, in the table and every rollup", async () => {
    const { db, cluster } = unreplicated;
    const sink = createReportSink(client, db, cluster);
    await sink.insert(batch, "batch-1");
    await sink.insert(batch, "batch-1");
    expect(await count(db, "reports")).toBe(40);
    expect(await count(db, "reports", "uniqExact(report_id)")).toBe(40);
    expect(await count(db, "reports_local")).toBe(40);
    expect(await count(db, "reports_minute_v", "sum(reports)")).toBe(40);
    expect(await count(db, "reports_daily_v", "sum(reports)")).toBe(40);
    // The same rows under another token are another batch: the repeat was dropped by its token.
    await sink.insert(batch, "batch-2");
    expect(await count(db, "reports")).toBe(80);
    expect(await count(db, "reports_daily_v", "sum(reports)")).toBe(80);
  });

  it("alert events inserted again with their token are stored once", async () => {
    const { db, cluster } = unreplicated;
    const event = (id: string): AlertEvent => ({
      id,
      rule_id: "rule-1",
      project,
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      metric: "requests",
      level: "warning",
      used_pct: 91,
      limit: 10_000,
      remaining: 900,
      reset_ms: 6_000,
      burn_per_s: null,
      exhaustion_eta_s: null,
      warn_pct: 90,
      critical_pct: 98,
      report_id: reportIdOf(batch[0] ?? []),
      at: new Date().toISOString(),
    });
    const sink = createEventSink(client, db, cluster);
    const events = [event("evt_a"), event("evt_b")];
    await sink.insert(events, "alerts-batch-1");
    await sink.insert(events, "alerts-batch-1");
    expect(await count(db, "alert_events_local")).toBe(2);
    expect(await count(db, "alert_events_v")).toBe(2);
  });

  it("each shard gets its rows with the token unchanged: two shards on one log keep one share", async () => {
    // Both shards of this cluster are this host and write to the same table, so they share one
    // deduplication log: the second shard's block arrives with the first one's token and is
    // dropped. On a real cluster `{shard}` in the Keeper path gives each shard a log of its own.
    const { db, cluster } = shared;
    await createReportSink(client, db, cluster).insert(batch, "batch-shared");
    const stored = await rows<{ shard: string; n: string }>(
      `SELECT cityHash64(report_id) % 2 AS shard, count() AS n FROM ${db}.reports_local GROUP BY shard`,
    );
    const shares = await rows<{ shard: string; n: string }>(
      `SELECT cityHash64(toUUID(id)) % 2 AS shard, count() AS n
       FROM (SELECT arrayJoin({ids:Array(String)}) AS id) GROUP BY shard ORDER BY shard`,
      { ids: batch.map(reportIdOf) },
    );
    expect(shares).toHaveLength(2);
    expect(stored).toHaveLength(1);
    expect(shares).toContainEqual(stored[0]);
  });
});

describe("migrate on a cluster whose schema is current", () => {
  const ctx = { db: name("current"), cluster: ONE, retentionDays: 30 };

  beforeAll(async () => {
    // The schema as every host holds it once `migrate` ran: migrations, TTLs, versions.
    for (const statement of schema(ctx)) {
      await client.command({ query: withoutKeeper(onEachHost(statement)) });
    }
    const engines = await rows<{ name: string; engine_full: string }>(
      "SELECT name, engine_full FROM system.tables WHERE database = {db:String}",
      { db: ctx.db },
    );
    for (const table of RETENTION_TABLES) {
      const engineFull = engines.find((e) => e.name === `${table.name}_local`)?.engine_full ?? "";
      for (const statement of retentionStatements(ctx, table, engineFull)) {
        await client.command({ query: onEachHost(statement) });
      }
    }
    await client.insert({
      table: `${ctx.db}.schema_migrations`,
      values: MIGRATIONS.map((m) => ({ version: m.version, name: m.name })),
      format: "JSONEachRow",
    });
  });

  afterAll(async () => {
    await client?.command({ query: `DROP DATABASE IF EXISTS ${ctx.db} SYNC` });
  });

  // This engine refuses every ON CLUSTER statement, as a cluster with a host down fails them:
  // a worker or `migrate` that finds the schema current must not need one.
  it("reads the applied versions and runs no DDL", async () => {
    await expect(migrate(client, ctx)).resolves.toEqual([]);
  });

  it("runs DDL, ON CLUSTER, only for what changed: here a new retention", async () => {
    await expect(migrate(client, { ...ctx, retentionDays: 20 })).rejects.toThrow(
      /Replicated DDL queries are disabled/,
    );
  });
});
