import { describe, expect, it } from "vitest";
import {
  createDatabase,
  type DdlContext,
  migrationsTable,
  REPLICATED_DEDUP_SECONDS,
} from "../../src/clickhouse/cluster-ddl.js";
import { MIGRATIONS } from "../../src/clickhouse/migrations.js";
import { distributedInsertSettings } from "../../src/clickhouse/report-sink.js";

// The schema's DDL in cluster mode, as text, against the forms ClickHouse documents:
//   CREATE TABLE [IF NOT EXISTS] [db.]name [ON CLUSTER cluster] (...) ENGINE = ...
//   CREATE TABLE [IF NOT EXISTS] [db.]name [ON CLUSTER cluster] AS [db2.]name2
//     ENGINE = Distributed(cluster, database, table[, sharding_key])
//   CREATE MATERIALIZED VIEW [IF NOT EXISTS] [db.]name [ON CLUSTER cluster] TO [db.]name AS ...
//   CREATE VIEW [IF NOT EXISTS] [db.]name [ON CLUSTER cluster] AS SELECT ...
//   CREATE OR REPLACE VIEW [db.]name [ON CLUSTER cluster] AS SELECT ... (a view made again to show
//     the columns added to its table)
//   ALTER TABLE [db.]name [ON CLUSTER cluster] MODIFY SETTING ...
//   ALTER TABLE [db.]name [ON CLUSTER cluster] ADD COLUMN [IF NOT EXISTS] name type [AFTER name]
//   ALTER TABLE [db.]name [ON CLUSTER cluster] MODIFY QUERY SELECT ...
//   ReplicatedMergeTree('zoo_path', 'replica_name') with the {shard}/{replica}/{database} macros
// The embedded engine's own parse of the same statements is in
// test/integration/clickhouse-cluster.test.ts.

const db = "hr_db";
const cluster = "analytics-eu";
const single: DdlContext & { retentionDays: number } = { db, retentionDays: 30 };
const onCluster = { ...single, cluster };

/** Every statement `migrate` runs on an empty database, in order, on one line each. */
function schema(ctx: typeof single): string[] {
  return [
    createDatabase(ctx),
    migrationsTable(ctx),
    ...MIGRATIONS.flatMap((m) => m.statements(ctx)),
  ].map((s) => s.replace(/\s+/g, " ").trim());
}

const ON = ` ON CLUSTER '${cluster}'`;
const NAME = `${db}\\.(\\w+)`;
const FORMS = {
  database: new RegExp(`^CREATE DATABASE IF NOT EXISTS ${db}${ON}$`),
  storage: new RegExp(
    `^CREATE TABLE IF NOT EXISTS ${NAME}${ON} \\(.* ENGINE = (\\w+)\\(([^)]*)\\) `,
  ),
  distributed: new RegExp(
    `^CREATE TABLE IF NOT EXISTS ${NAME}${ON} AS ${NAME} ENGINE = Distributed\\(([^)]*(?:\\([^)]*\\))?)\\)$`,
  ),
  mv: new RegExp(`^CREATE MATERIALIZED VIEW IF NOT EXISTS ${NAME}${ON} TO ${NAME} AS SELECT `),
  view: new RegExp(`^CREATE VIEW IF NOT EXISTS ${NAME}${ON} AS SELECT `),
  replaceView: new RegExp(`^CREATE OR REPLACE VIEW ${NAME}${ON} AS SELECT `),
  alter: new RegExp(`^ALTER TABLE ${NAME}${ON} MODIFY SETTING (.*)$`),
  addColumn: new RegExp(`^ALTER TABLE ${NAME}${ON} ADD COLUMN IF NOT EXISTS \\w+ .+$`),
  modifyQuery: new RegExp(`^ALTER TABLE ${NAME}${ON} MODIFY QUERY SELECT `),
};
type Form = keyof typeof FORMS;

function classify(statement: string): { form: Form; m: RegExpMatchArray } {
  const matches = (Object.keys(FORMS) as Form[]).flatMap((form) => {
    const m = statement.match(FORMS[form]);
    return m ? [{ form, m }] : [];
  });
  expect(
    matches.map((x) => x.form),
    statement,
  ).toHaveLength(1);
  return matches[0] as { form: Form; m: RegExpMatchArray };
}

const clustered = schema(onCluster).map((s) => ({ s, ...classify(s) }));
const of = (form: Form) => clustered.filter((c) => c.form === form);
/** Names of objects a statement creates, in order (ALTERs create nothing). */
const created = (statements: string[]) =>
  statements.flatMap((s) => {
    const m = s.match(/^CREATE (?:TABLE|MATERIALIZED VIEW|VIEW) IF NOT EXISTS \w+\.(\w+)/);
    return m?.[1] ? [m[1]] : [];
  });
const position = (name: string) => created(schema(onCluster)).indexOf(name);
const args = (list: string) => list.split(",").map((a) => a.trim());

describe("cluster DDL: every statement ON CLUSTER, in the documented place", () => {
  it("each statement has exactly one documented form, with ON CLUSTER after its name", () => {
    // classify() fails on a statement with no form or two. A cluster adds the Distributed tables,
    // and a column added to a table is added to its Distributed table too.
    const onDistributed = of("addColumn").filter((c) => !c.m[1]?.endsWith("_local"));
    expect(clustered.length).toBe(
      schema(single).length + of("distributed").length + onDistributed.length,
    );
    for (const { s } of clustered) expect(s.split(" ON CLUSTER ")).toHaveLength(2);
  });

  it("the cluster name is quoted wherever it appears", () => {
    for (const { s } of clustered) {
      expect(s.replaceAll(`'${cluster}'`, "")).not.toContain(cluster);
    }
  });
});

describe("cluster DDL: storage tables", () => {
  const storage = of("storage");

  it("store rows in `<name>_local` tables, replicated with the shard and the table in the path", () => {
    expect(storage.map((c) => c.m[1])).toEqual([
      "schema_migrations",
      "reports_local",
      "reports_minute_local",
      "reports_daily_local",
      "latest_limits_local",
      "alert_events_local",
      "report_windows_minute_local",
      "report_windows_daily_local",
      "report_pools_minute_local",
      "report_pools_daily_local",
    ]);
    for (const { m } of storage.slice(1)) {
      const [name, engine, engineArgs = ""] = [m[1], m[2], m[3]];
      expect(engine).toMatch(/^Replicated(Replacing|Aggregating)MergeTree$/);
      expect(args(engineArgs)).toEqual([
        `'/clickhouse/tables/{shard}/{database}/${name}'`,
        "'{replica}'",
      ]);
    }
  });

  it("keep the single node's engine family, each replicated", () => {
    const singleEngines = schema(single).flatMap((s) => {
      const m = s.match(/^CREATE TABLE IF NOT EXISTS \w+\.(\w+) \(.* ENGINE = (\w+) /);
      return m ? [`${m[1]} Replicated${m[2]}`] : [];
    });
    const clusterEngines = storage.map((c) => `${c.m[1]?.replace(/_local$/, "")} ${c.m[2]}`);
    expect(clusterEngines).toEqual(singleEngines);
  });

  it("no two tables share a Keeper path", () => {
    const paths = storage.map((c) => args(c.m[3] ?? "")[0]);
    expect(new Set(paths).size).toBe(paths.length);
  });

  it("deduplicate as many inserts as on a single node, for longer than ClickHouse's default", () => {
    const singleWindow = schema(single)
      .join("\n")
      .match(/non_replicated_deduplication_window = (\d+)/)?.[1];
    expect(Number(singleWindow)).toBeGreaterThanOrEqual(100_000);
    expect(REPLICATED_DEDUP_SECONDS).toBeGreaterThan(3600);
    const settings = `SETTINGS replicated_deduplication_window = ${singleWindow}, replicated_deduplication_window_seconds = ${REPLICATED_DEDUP_SECONDS}`;
    for (const { s } of storage.slice(1)) expect(s).toContain(settings);
    for (const { m } of of("alter")) {
      expect(m[2]).toBe(settings.replace("SETTINGS ", ""));
    }
    expect(clustered.map((c) => c.s).join("\n")).not.toContain("non_replicated");
  });

  it("the migrations table is replicated to every host: no shard in its path", () => {
    const [migrations] = storage;
    expect(migrations?.m[2]).toBe("ReplicatedReplacingMergeTree");
    expect(args(migrations?.m[3] ?? "")).toEqual([
      "'/clickhouse/tables/{database}/schema_migrations'",
      "'{shard}-{replica}'",
    ]);
  });

  it("ALTERs address the local tables", () => {
    const alters = of("alter").map((c) => c.m[1]);
    expect(alters.length).toBeGreaterThan(0);
    for (const name of alters) expect(name).toMatch(/_local$/);
  });
});

describe("cluster DDL: Distributed tables", () => {
  const fronts = of("distributed");

  it("stand under each data table's public name, over its local table, after it", () => {
    const local = of("storage")
      .slice(1)
      .map((c) => c.m[1]);
    expect(fronts.map((c) => c.m[2])).toEqual(local);
    for (const { m } of fronts) {
      const [name = "", source = "", engineArgs = ""] = [m[1], m[2], m[3]];
      expect(source).toBe(`${name}_local`);
      expect(position(name)).toBeGreaterThan(position(source));
      expect(args(engineArgs).slice(0, 3)).toEqual([`'${cluster}'`, `'${db}'`, `'${source}'`]);
    }
  });

  it("shard the tables Headroom inserts into by their row id; the rollups only read", () => {
    const keys = Object.fromEntries(fronts.map((c) => [c.m[1], args(c.m[3] ?? "")[3] ?? null]));
    expect(keys).toEqual({
      reports: "cityHash64(report_id)",
      reports_minute: null,
      reports_daily: null,
      latest_limits: null,
      alert_events: "cityHash64(event_id)",
      // rederive-windows inserts a day of them made again through the front.
      report_windows_minute: "cityHash64(project_id)",
      report_windows_daily: "cityHash64(project_id)",
      report_pools_minute: null,
      report_pools_daily: null,
    });
  });

  it("analysts query the same names as on a single node", () => {
    const publicNames = created(clustered.map((c) => c.s)).filter((n) => !n.endsWith("_local"));
    expect(publicNames.sort()).toEqual(created(schema(single)).sort());
  });
});

describe("cluster DDL: views", () => {
  it("materialized views read the host's local reports and write a local table made before", () => {
    const mvs = of("mv");
    expect(mvs.map((c) => c.m[1])).toEqual([
      "reports_minute_mv",
      "reports_daily_mv",
      "latest_limits_mv",
      "report_windows_minute_mv",
      "report_windows_daily_mv",
      "report_pools_minute_mv",
      "report_pools_daily_mv",
    ]);
    for (const { s, m } of mvs) {
      const target = m[2] ?? "";
      expect(target).toBe(`${m[1]?.replace(/_mv$/, "")}_local`);
      expect(position(target)).toBeGreaterThan(-1);
      expect(position(target)).toBeLessThan(position(m[1] ?? ""));
      expect([...s.matchAll(/ FROM (\S+)/g)].map((f) => f[1])).toEqual([`${db}.reports_local`]);
    }
  });

  it("plain views read the Distributed tables, never a local one", () => {
    for (const { s } of of("view")) {
      const sources = [...s.matchAll(/ FROM (\w+\.\w+)/g)].map((f) => f[1]);
      expect(sources.length).toBeGreaterThan(0);
      for (const source of sources) expect(source).not.toMatch(/_local$/);
    }
  });
});

describe("single-node DDL", () => {
  it("has no cluster, replication, Distributed table or local name", () => {
    const text = schema(single).join("\n");
    for (const word of ["ON CLUSTER", "Replicated", "Distributed", "_local", "{shard}"]) {
      expect(text).not.toContain(word);
    }
    expect(text).toContain("ENGINE = ReplacingMergeTree ");
  });
});

describe("insert settings", () => {
  it("insert into Distributed tables in the foreground; nothing changes on a single node", () => {
    expect(distributedInsertSettings(undefined)).toEqual({});
    expect(distributedInsertSettings(cluster)).toEqual({ distributed_foreground_insert: 1 });
  });
});
