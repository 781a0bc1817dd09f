import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClickHouseClient } from "@clickhouse/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { createClickHouse } from "../../src/clickhouse/client.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { rowsJson } from "../../src/clickhouse/rows-json.js";
import {
  type EmbeddedClickHouse,
  startEmbeddedClickHouse,
} from "../../src/local/clickhouse/server.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";

// The sink sends a manifest's JSON array as it is, its brackets dropped: rows separated by commas,
// which ClickHouse's JSONCompactEachRow reads as it reads rows separated by newlines. Strings that
// hold JSON's own delimiters must land field-exact, over HTTP as production sends them.

const dir = mkdtempSync(join(tmpdir(), "headroom-sink-"));
const db = "t_sink";
let server: EmbeddedClickHouse;
let client: ClickHouseClient;

const APP = REPORT_COLUMNS.indexOf("app");
const MODEL = REPORT_COLUMNS.indexOf("model");
const ODD = ["a],[b", '"],["', "\\", '\\"', "x,y", "[", "]", "\n", "\u2028\u2029", "é😀", "{}", ""];

function oddRows(project: string): ReportRow[] {
  return ODD.flatMap((s, i) => {
    const row = sampleRow(i, project);
    row[APP] = s === "" ? "app" : s;
    row[MODEL] = `${s}${s}`;
    return [row];
  });
}

async function stored(project: string): Promise<unknown[][]> {
  const rs = await client.query({
    query: `SELECT ${REPORT_COLUMNS.join(", ")} FROM ${db}.reports
      WHERE project_id = {p:String}`,
    query_params: { p: project },
    format: "JSONCompactEachRow",
  });
  return rs.json<unknown[]>();
}

beforeAll(async () => {
  server = await startEmbeddedClickHouse({ path: join(dir, "data"), port: 0 });
  client = createClickHouse({
    CLICKHOUSE_URL: server.url,
    CLICKHOUSE_USER: "default",
    CLICKHOUSE_PASSWORD: "",
    CLICKHOUSE_DATABASE: "default",
    CLICKHOUSE_PATH: join(dir, "unused"),
    CLICKHOUSE_REQUEST_TIMEOUT_MS: 60_000,
  });
  await migrate(client, { db, retentionDays: 30 });
});

afterAll(async () => {
  await client?.close();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("report sink", () => {
  it("stores rows whose strings hold JSON's delimiters, field-exact", async () => {
    const rows = oddRows("p-odd");
    await createReportSink(client, db).insert(rows, "token-odd", rowsJson(rows));
    const fields = (r: unknown[]) => [r[0], r[APP], r[MODEL]];
    const byId = (a: unknown[], b: unknown[]) => (String(a[0]) < String(b[0]) ? -1 : 1);
    const back = await stored("p-odd");
    expect(back.map(fields).sort(byId)).toEqual(rows.map(fields).sort(byId));
  });

  it("keeps one copy of a batch inserted again with its token, from its JSON or its rows", async () => {
    const rows = oddRows("p-again");
    const sink = createReportSink(client, db);
    await sink.insert(rows, "token-again", rowsJson(rows));
    await sink.insert(rows, "token-again");
    await sink.insert(rows, "token-again", rowsJson(rows));
    expect(await stored("p-again")).toHaveLength(rows.length);
  });
});
