import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClickHouseClient } from "@clickhouse/client";
import { drainPending } from "chdb";
import { afterAll, beforeAll, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { createClickHouse } from "../../src/clickhouse/client.js";
import { MIGRATIONS, migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { REPORT_COLUMNS } from "../../src/report/report-schema.js";
import { ROW_SHAPE_HISTORY } from "../../src/report/row-shapes.js";

// The pool rollups (migration 12, what /usage?group_by=pool joins): the reports stored before it
// are backfilled, those stored after reach it through its views, and each series' pool in a
// bucket is its newest report's there (an account before a label before the app alone).

const dir = mkdtempSync(join(tmpdir(), "headroom-pool-rollups-"));
let client: ClickHouseClient;
const DB = "t_pool_rollups";
const chTime = (t: number) => new Date(t).toISOString().replace("T", " ").replace("Z", "");
const at = (c: string) => REPORT_COLUMNS.indexOf(c as (typeof REPORT_COLUMNS)[number]);
const MINUTE = Math.floor(Date.now() / 60_000) * 60_000 - 5 * 60_000;

function row(i: number, app: string, t: number, account: string | null, pool: string | null) {
  const r = sampleRow(i, "p-pools");
  r[at("app")] = app;
  r[at("provider")] = "openai";
  r[at("model")] = "gpt-4o";
  r[at("timestamp")] = chTime(t);
  r[at("account")] = account;
  r[at("pool")] = pool;
  return r;
}

async function pools(): Promise<Record<string, string>> {
  const rs = await client.query({
    query: `SELECT app, toUnixTimestamp(bucket) * 1000 AS b, argMaxMerge(pool_key) AS k
      FROM ${DB}.report_pools_minute WHERE project_id = 'p-pools' GROUP BY app, b ORDER BY app, b`,
    format: "JSONEachRow",
  });
  const rows = await rs.json<{ app: string; b: string; k: string }>();
  return Object.fromEntries(rows.map((r) => [`${r.app}@${Number(r.b) - MINUTE}`, r.k]));
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

it("backfills the reports stored before, and keeps each series' newest pool per bucket after", async () => {
  const before = MIGRATIONS.filter((m) => m.version < 12);
  expect(before.map((m) => m.name).at(-1)).toBe("report_pools");
  await migrate(client, { db: DB, retentionDays: 30 }, () => {}, before);
  // Rows as the release before wrote them: row shape 3, the columns a database at migration 11 has.
  const shape3 = ROW_SHAPE_HISTORY[3] as readonly string[];
  const older = createReportSink(client, DB, undefined, shape3);
  await older.insert(
    [
      row(1, "chat", MINUTE + 1_000, null, "shared"),
      // Newer in the same minute, and an account: chat's pool there is the account's.
      row(2, "chat", MINUTE + 2_000, "0123456789abcdef0123456789abcdef", "shared"),
      row(3, "solo", MINUTE + 3_000, null, null),
    ].map((r) => r.slice(0, shape3.length)),
    "pool-rollups-before",
  );
  await migrate(client, { db: DB, retentionDays: 30 });
  expect(await pools()).toEqual({
    "chat@0": "a:0123456789abcdef0123456789abcdef",
    "solo@0": "",
  });
  // After the migration, through the view: an older report does not move the bucket's pool.
  const sink = createReportSink(client, DB);
  await sink.insert(
    [row(4, "chat", MINUTE + 500, null, "older"), row(5, "solo", MINUTE + 60_000, null, "shared")],
    "pool-rollups-after",
  );
  expect(await pools()).toEqual({
    "chat@0": "a:0123456789abcdef0123456789abcdef",
    "solo@0": "",
    "solo@60000": "l:shared",
  });
});
