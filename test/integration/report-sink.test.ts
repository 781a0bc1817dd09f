import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { ClickHouseClient } from "@clickhouse/client";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { classifyInsertError } from "../../src/clickhouse/classify-error.js";
import { createClickHouse } from "../../src/clickhouse/client.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { createReportSink, exactInsertSettings } from "../../src/clickhouse/report-sink.js";
import { WINDOW_COLUMNS, windowCellsOf } from "../../src/clickhouse/report-windows.js";
import { type EncodeReports, reportRowBinary } from "../../src/clickhouse/row-binary.js";
import { rowsJson } from "../../src/clickhouse/rows-json.js";
import {
  type EmbeddedClickHouse,
  startEmbeddedClickHouse,
} from "../../src/local/clickhouse/server.js";
import type { WindowRecord } from "../../src/providers/derive-windows.js";
import type { DerivedWindows } from "../../src/providers/window.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import { derivedWindows, reportRows } from "../helpers/report-row-arbitraries.js";

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
  await migrate(client, { db: "t_sink_rb", retentionDays: 3650 });
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

describe("report sink in RowBinary", () => {
  const jsonDb = "t_sink_json";
  const columns = ROW_SHAPES.columns;
  // Every row gets one of a few sets of windows, chosen by its record: the same in both tables.
  const windowSets = fc.sample(derivedWindows, 40);
  const derive = (record: WindowRecord) => {
    const key = JSON.stringify(record);
    let h = 0;
    for (let i = 0; i < key.length; i++) h = (h * 31 + key.charCodeAt(i)) | 0;
    return windowSets[Math.abs(h) % windowSets.length] as DerivedWindows;
  };

  /** The same rows as the sink sent them before RowBinary: JSONCompactEachRow. */
  async function insertJson(rows: ReportRow[], token: string) {
    const cells = windowCellsOf(columns, derive);
    const body = rows.map((r) => JSON.stringify((r as unknown[]).concat(cells(r)))).join("\n");
    await client.exec({
      query: `INSERT INTO ${jsonDb}.reports (${[...columns, ...WINDOW_COLUMNS].join(", ")}) FORMAT JSONCompactEachRow`,
      values: Readable.from([Buffer.from(body)], { objectMode: false }),
      clickhouse_settings: exactInsertSettings(token, undefined),
    });
  }

  async function all(database: string, project?: string): Promise<string> {
    const rs = await client.query({
      query: `SELECT * EXCEPT (inserted_at) FROM ${database}.reports
        ${project ? "WHERE project_id = {p:String}" : ""}
        ORDER BY report_id, project_id, key_id, timestamp, received_at`,
      query_params: project ? { p: project } : {},
      format: "TabSeparated",
    });
    return rs.text();
  }

  beforeAll(async () => {
    await migrate(client, { db: jsonDb, retentionDays: 3650 });
  });

  it("stores every kind of value as JSONCompactEachRow stored it, field-exact", async () => {
    const rows = fc.sample(reportRows, 400);
    // Each row's report id is new, and its project this test's: its rows are compared whole.
    const project = columns.indexOf("project_id");
    for (const [i, row] of rows.entries()) {
      row[0] = `${String(i).padStart(8, "0")}${String(row[0]).slice(8)}`;
      row[project] = "p-every-kind";
    }
    // These rows must go as RowBinary, or the comparison would compare JSON with JSON.
    expect(
      (reportRowBinary(columns) as EncodeReports)(rows, windowCellsOf(columns, derive)),
    ).toBeInstanceOf(Buffer);
    await createReportSink(
      client,
      jsonDb.replace("_json", "_rb"),
      undefined,
      columns,
      derive,
    ).insert(rows, "rb-all");
    await insertJson(rows, "json-all");
    const [binary, json] = [
      await all("t_sink_rb", "p-every-kind"),
      await all(jsonDb, "p-every-kind"),
    ];
    expect(binary.split("\n")).toHaveLength(rows.length + 1);
    expect(binary).toEqual(json);
  });

  it("sends as JSON a batch holding a value RowBinary would not store as JSON does", async () => {
    const base = sampleRow(1, "p-fallback");
    const cost = columns.indexOf("request_cost");
    const limit = columns.indexOf("requests_limit");
    // ClickHouse truncates a 13th decimal, and wraps 2^63 round: what JSON stored, kept.
    const odd: ReportRow[] = [
      Object.assign([...base], { [cost]: "0.0000000000019" }),
      Object.assign([...sampleRow(2, "p-fallback")], { [limit]: 2 ** 63 }),
    ];
    expect(
      (reportRowBinary(columns) as EncodeReports)(odd, windowCellsOf(columns, derive)),
    ).toBeUndefined();
    await createReportSink(client, "t_sink_rb", undefined, columns, derive).insert(odd, "rb-odd");
    await insertJson(odd, "json-odd");
    expect(await all("t_sink_rb", "p-fallback")).toEqual(await all(jsonDb, "p-fallback"));
    expect(await all("t_sink_rb", "p-fallback")).toContain("-9223372036854775616");
  });

  it("refuses a row ClickHouse cannot take with a data error, as JSON did", async () => {
    const bad = Object.assign([...sampleRow(3, "p-bad")], { 0: "not-a-uuid" });
    const err = await createReportSink(client, "t_sink_rb", undefined, columns, derive)
      .insert([sampleRow(4, "p-bad"), bad], "rb-bad")
      .catch((e: unknown) => e);
    expect(classifyInsertError(err)).toBe("data");
  });
});
