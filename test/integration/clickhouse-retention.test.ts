import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClickHouseClient } from "@clickhouse/client";
import { drainPending } from "chdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { createClickHouse } from "../../src/clickhouse/client.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { RETENTION_TABLES } from "../../src/clickhouse/retention.js";

// RETENTION_DAYS on tables that exist: `migrate` brings their TTLs to the setting, and rows past
// it leave in the next merge, in `reports`, the rollups and `latest_limits`.

const dir = mkdtempSync(join(tmpdir(), "headroom-retention-"));
let client: ClickHouseClient;

const DAY_MS = 86_400_000;
/** ClickHouse's DateTime64(3) text of a time in ms. */
const chTime = (t: number) => new Date(t).toISOString().replace("T", " ").replace("Z", "");

let databases = 0;
/** A database of the test's own, migrated with a 30-day retention. */
async function migrated(): Promise<string> {
  databases += 1;
  const db = `t_retention_${databases}`;
  await migrate(client, { db, retentionDays: 30 });
  return db;
}

async function engines(db: string): Promise<Map<string, string>> {
  const rs = await client.query({
    query: "SELECT name, engine_full FROM system.tables WHERE database = {db:String}",
    query_params: { db },
    format: "JSONEachRow",
  });
  const rows = await rs.json<{ name: string; engine_full: string }>();
  return new Map(rows.map((r) => [r.name, r.engine_full]));
}

async function count(sql: string): Promise<number> {
  const rs = await client.query({ query: sql, format: "JSONEachRow" });
  const [row] = await rs.json<{ n: string }>();
  return Number(row?.n);
}

beforeAll(async () => {
  client = createClickHouse({
    CLICKHOUSE_PATH: join(dir, "data"),
    CLICKHOUSE_USER: "default",
    CLICKHOUSE_PASSWORD: "",
    CLICKHOUSE_DATABASE: "default",
    CLICKHOUSE_REQUEST_TIMEOUT_MS: 60_000,
  });
});

afterAll(async () => {
  await client?.close();
  await drainPending();
  rmSync(dir, { recursive: true, force: true });
});

describe("migrate and RETENTION_DAYS", () => {
  it("creates every table with its TTL, dropping whole parts where partitioned", async () => {
    const shown = await engines(await migrated());
    for (const t of RETENTION_TABLES) {
      const engine = shown.get(t.name) ?? "";
      expect(engine, t.name).toContain(`TTL toDateTime(${t.column}) + toIntervalDay(30)`);
      expect(/ttl_only_drop_parts = 1/.test(engine), t.name).toBe(t.dropParts);
    }
  });

  it("runs no DDL when the schema and the TTLs are as configured", async () => {
    const db = await migrated();
    const said: string[] = [];
    expect(await migrate(client, { db, retentionDays: 30 }, (m) => said.push(m))).toEqual([]);
    expect(said).toEqual([]);
  });

  it("applies a new retention to existing tables, and rows past it expire", async () => {
    const db = await migrated();
    const said: string[] = [];
    expect(await migrate(client, { db, retentionDays: 10 }, (m) => said.push(m))).toEqual([]);
    expect(said.length).toBeGreaterThan(0);
    const shown = await engines(db);
    for (const t of RETENTION_TABLES) {
      expect(shown.get(t.name), t.name).toContain(
        `TTL toDateTime(${t.column}) + toIntervalDay(10)`,
      );
    }

    // Twenty days old: kept under a 30-day retention, expired under a 10-day one. Written after
    // the change: parts written before keep their old TTL until they merge (or MATERIALIZE TTL).
    // No TTL merge runs until the row was seen stored.
    await client.command({ query: "SYSTEM STOP TTL MERGES" });
    const old = Date.now() - 20 * DAY_MS;
    const row = sampleRow(1, "p-old");
    row[6] = chTime(old); // timestamp
    row[7] = chTime(old); // received_at
    await createReportSink(client, db).insert([row], "retention-old-row");
    const stored = `SELECT count() AS n FROM ${db}.reports_v WHERE project_id = 'p-old'`;
    expect(await count(stored)).toBe(1);

    await client.command({ query: "SYSTEM START TTL MERGES" });
    for (const t of RETENTION_TABLES) {
      await client.command({ query: `OPTIMIZE TABLE ${db}.${t.name} FINAL` });
    }
    expect(await count(stored)).toBe(0);
    for (const view of ["reports_daily_v", "reports_minute_v", "latest_limits_v"]) {
      expect(
        await count(`SELECT count() AS n FROM ${db}.${view} WHERE project_id = 'p-old'`),
        view,
      ).toBe(0);
    }
  });
});
