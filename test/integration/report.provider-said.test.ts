import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS, migrate, windowRollupSelect } from "../../src/clickhouse/migrations.js";
import { rederiveWindows } from "../../src/clickhouse/rederive.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { cellsOf } from "../../src/clickhouse/report-windows.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { windowsOfRecord } from "../../src/providers/derive-windows.js";
import type { DerivedWindows } from "../../src/providers/window.js";
import {
  REPORT_COLUMNS,
  type ReportRecord,
  reportBodySchema,
  toRecord,
  toRow,
} from "../../src/report/report-schema.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type OwnRedis, startOwnRedis } from "../helpers/own-redis.js";
import { type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";
import { redisText } from "../helpers/redis-text.js";

// Issue 34, ingest and storage: a report may carry the provider's headers and error body. Only
// the allowlisted rate-limit headers are kept, and stored with the report and its windows; every
// other header is found nowhere (Redis, ClickHouse, the logs). A report of the real client
// library (neither field) stores what it stored before. `rederive-windows` rewrites windows once
// in every view.

const PROJECT = `p-said-${uniqueId()}`;
const MARKER = `mk${uniqueId()}${uniqueId()}`;
let p: Pipeline;
// Redis of this file's own: "found nowhere" reads every key there is.
let redis: OwnRedis;
let edge: Edge;
let worker: IngestWorker | undefined;
let key: string;
const logLines: string[] = [];
const capture = new Writable({
  write(chunk, _enc, done) {
    logLines.push(String(chunk));
    done();
  },
});
// Every level: whatever any process part would log is searched.
const logger = createLogger("trace", "test", capture);

beforeAll(async () => {
  redis = await startOwnRedis();
  p = await startPipeline({ ALERTS_ENABLED: "false", REDIS_URL: redis.url });
  edge = await createEdge(p.config, logger);
  ({ key } = await edge.keyStore.create(PROJECT, { defaultPlan: "unlimited" }));
});

afterAll(async () => {
  await worker?.close();
  await edge?.close();
  await p?.close();
  await redis?.stop();
});

const DAY = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);

/** Anthropic's rate-limit headers (its documentation's names), in mixed casing. */
const ANTHROPIC = {
  "Anthropic-RateLimit-Requests-Limit": "50",
  "anthropic-ratelimit-requests-remaining": "49",
  "anthropic-ratelimit-requests-reset": `${DAY}T10:00:30Z`,
  "anthropic-ratelimit-input-tokens-limit": "40000",
  "anthropic-ratelimit-input-tokens-remaining": "39000",
  "anthropic-ratelimit-input-tokens-reset": `${DAY}T10:00:05Z`,
  "anthropic-ratelimit-output-tokens-limit": "8000",
  "anthropic-ratelimit-output-tokens-remaining": "7900",
  "anthropic-ratelimit-output-tokens-reset": `${DAY}T10:00:02Z`,
  "retry-after": "5",
};
/** What the edge keeps of ANTHROPIC, written out (not computed by the code under test). */
const ANTHROPIC_KEPT = {
  "anthropic-ratelimit-requests-limit": "50",
  "anthropic-ratelimit-requests-remaining": "49",
  "anthropic-ratelimit-requests-reset": `${DAY}T10:00:30Z`,
  "anthropic-ratelimit-input-tokens-limit": "40000",
  "anthropic-ratelimit-input-tokens-remaining": "39000",
  "anthropic-ratelimit-input-tokens-reset": `${DAY}T10:00:05Z`,
  "anthropic-ratelimit-output-tokens-limit": "8000",
  "anthropic-ratelimit-output-tokens-remaining": "7900",
  "anthropic-ratelimit-output-tokens-reset": `${DAY}T10:00:02Z`,
  "retry-after": "5",
};
/** Headers that must never be kept, each holding the marker. */
const SECRET = {
  "Set-Cookie": `session=${MARKER}; Path=/`,
  "openai-organization": `org-${MARKER}`,
  "x-request-id": `req_${MARKER}`,
  Authorization: `Bearer ${MARKER}`,
  [`x-${MARKER}`]: "1",
};

async function post(body: unknown) {
  const res = await edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { id: string; warnings?: { path: string; message: string }[] };
}

/** Every row of every table and view of the test's database, as text. */
async function clickhouseText(): Promise<string> {
  const tables = await (
    await p.client.query({
      query: "SELECT name FROM system.tables WHERE database = {db:String}",
      query_params: { db: p.db },
      format: "JSONEachRow",
    })
  ).json<{ name: string }>();
  expect(tables.map((t) => t.name)).toContain("reports");
  const parts: string[] = [];
  for (const { name } of tables) {
    // A materialized view's rows are its target table's, read there.
    if (name.endsWith("_mv")) continue;
    const rs = await p.client.query({
      query: `SELECT * FROM ${p.db}.${name}`,
      format: "JSONEachRow",
    });
    parts.push(await rs.text());
  }
  return parts.join("\n");
}

const WINDOWS = [
  "`windows.dimension`",
  "`windows.window`",
  "`windows.limit`",
  "`windows.remaining`",
  "`windows.resets_at`",
  "windows_parser",
];

/** A stored report: its record (the row's columns) and its windows' cells. */
async function storedReport(id: string) {
  const rs = await p.client.query({
    query: `SELECT ${REPORT_COLUMNS.join(", ")}, ${WINDOWS.join(", ")} FROM ${p.db}.reports_v
      WHERE report_id = {id:UUID}`,
    query_params: { id },
    format: "JSONCompactEachRow",
    clickhouse_settings: {
      output_format_json_quote_64bit_integers: 0,
      output_format_json_quote_decimals: 0,
    },
  });
  const rows = await rs.json<unknown[]>();
  expect(rows).toHaveLength(1);
  const row = rows[0] as unknown[];
  const record = Object.fromEntries(REPORT_COLUMNS.map((c, i) => [c, row[i]])) as Record<
    string,
    unknown
  >;
  for (const c of ["timestamp", "received_at"])
    record[c] = `${String(record[c]).replace(" ", "T")}Z`;
  return { record: record as ReportRecord, windows: row.slice(REPORT_COLUMNS.length) };
}

describe("a report with the provider's headers and error body", () => {
  it("keeps only allowlisted headers: stored with their windows, the rest found nowhere", async () => {
    const error = { error: { type: "rate_limit_error", message: "Number of request tokens" } };
    const objectForm = await post({
      ...clientReport({ provider: "anthropic", timestamp: `${DAY}T10:00:00.000Z` }),
      headers: { ...ANTHROPIC, ...SECRET },
      error,
    });
    expect(objectForm.warnings).toBeUndefined();
    // The pair form, a name sent twice.
    const pairForm = await post({
      ...clientReport({ provider: "anthropic", timestamp: `${DAY}T10:00:01.000Z` }),
      headers: [
        ...Object.entries(SECRET),
        ["x-ratelimit-limit-requests", "60"],
        ["X-RateLimit-Limit-Requests", "70"],
      ],
    });

    // Queued (or, when a worker another test of this file left running took the job already,
    // stored): the kept headers are there, the others nowhere.
    const queued = await redisText(p.redis);
    expect(`${queued}\n${await clickhouseText()}`).toContain(
      "anthropic-ratelimit-input-tokens-limit",
    );
    expect(queued).not.toContain(MARKER);

    worker ??= startIngestWorker(p, logger);
    await eventually(async () => {
      const rs = await p.client.query({
        query: `SELECT count() AS n FROM ${p.db}.reports_v WHERE report_id IN {ids:Array(UUID)}`,
        query_params: { ids: [objectForm.id, pairForm.id] },
        format: "JSONEachRow",
      });
      expect(await rs.json()).toEqual([{ n: 2 }]);
    });

    const a = await storedReport(objectForm.id);
    expect(JSON.parse(a.record.headers ?? "null")).toEqual(ANTHROPIC_KEPT);
    expect(JSON.parse(a.record.error ?? "null")).toEqual(error);
    // Its windows are what the providers' parsers make of the stored record.
    expect(a.windows).toEqual(cellsOf(windowsOfRecord(a.record)));
    const b = await storedReport(pairForm.id);
    expect(JSON.parse(b.record.headers ?? "null")).toEqual({
      "x-ratelimit-limit-requests": "60, 70",
    });
    expect(b.record.error).toBeNull();
    expect(b.windows).toEqual(cellsOf(windowsOfRecord(b.record)));

    expect(await redisText(p.redis)).not.toContain(MARKER);
    expect(await clickhouseText()).not.toContain(MARKER);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join("")).not.toContain(MARKER);
  });

  it("keeps at most 64 headers, names of 128 and values of 512 characters, dropping the rest with a warning", async () => {
    // The documented bounds (docs/report-api.md), as literals.
    const name128 = `x-ratelimit-${"a".repeat(116)}`;
    const value512 = "9".repeat(512);
    const report = (second: number, headers: unknown) => ({
      ...clientReport({ provider: "openai", timestamp: `${DAY}T09:00:0${second}.000Z` }),
      headers,
    });
    const within = await post(
      report(0, {
        [name128]: "1",
        [`${name128}a`]: "1",
        "retry-after": value512,
        "x-ratelimit-limit-requests": `${value512}9`,
      }),
    );
    // The warnings about the bounds (a parser may warn about what a kept value says, too).
    const bounds = (answer: { warnings?: unknown }) =>
      ((answer.warnings ?? []) as { path: string }[]).filter((w) => w.path === "headers");
    expect(bounds(within)).toEqual([
      {
        path: "headers",
        message:
          "2 rate-limit header(s) with a name over 128 or a value over 512 characters: dropped",
      },
    ]);
    const headers = (n: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-ratelimit-w${i}`, String(i)]));
    const sixtyFour = await post(report(1, headers(64)));
    expect(bounds(sixtyFour)).toEqual([]);
    const sixtyFive = await post(report(2, headers(65)));
    expect(bounds(sixtyFive)).toEqual([
      { path: "headers", message: "more than 64 rate-limit headers: 1 dropped" },
    ]);

    worker ??= startIngestWorker(p, logger);
    const stored = async (id: string) => {
      let s: Awaited<ReturnType<typeof storedReport>> | undefined;
      await eventually(async () => {
        s = await storedReport(id);
      });
      return JSON.parse(s?.record.headers ?? "null") as Record<string, string>;
    };
    expect(await stored(within.id)).toEqual({ [name128]: "1", "retry-after": value512 });
    expect(await stored(sixtyFour.id)).toEqual(headers(64));
    expect(await stored(sixtyFive.id)).toEqual(headers(64));
  });

  it("stores a retry delay past a year (Azure's retry-after-ms, Gemini's retryDelay) as null, with a warning", async () => {
    const huge = "9".repeat(300);
    const azure = await post({
      ...clientReport({ provider: "azure", timestamp: `${DAY}T09:00:00.000Z` }),
      limits: {},
      headers: { "x-ratelimit-remaining-tokens": "0", "retry-after-ms": huge },
    });
    const gemini = await post({
      ...clientReport({ provider: "gemini", timestamp: `${DAY}T09:00:01.000Z` }),
      limits: {},
      error: {
        error: {
          details: [
            {
              "@type": "type.googleapis.com/google.rpc.QuotaFailure",
              violations: [{ quotaId: "GenerateRequestsPerMinute" }],
            },
            { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${huge}s` },
          ],
        },
      },
    });
    expect(azure.warnings).toEqual([
      { path: "headers.retry-after-ms", message: expect.stringMatching(/out of range/) },
    ]);
    expect(gemini.warnings).toEqual([
      {
        path: "error.error.details[1].retryDelay",
        message: expect.stringMatching(/out of range/),
      },
    ]);
    worker ??= startIngestWorker(p, logger);
    for (const [id, dimension] of [
      [azure.id, "tokens"],
      [gemini.id, "requests"],
    ] as const) {
      const stored = await eventually(() => storedReport(id));
      const [dimensions, , , remaining, resetsAt] = stored.windows as [
        string[],
        unknown,
        unknown,
        number[],
        (string | null)[],
      ];
      expect(dimensions).toEqual([dimension]);
      expect(remaining).toEqual([0]);
      expect(resetsAt).toEqual([null]);
    }
  });

  it("stores a report of the real client library as before: no headers, no error, legacy windows", async () => {
    const { id } = await post(clientReport({ timestamp: `${DAY}T11:00:00.000Z` }));
    worker ??= startIngestWorker(p, logger);
    const expected = toRecord(
      reportBodySchema.parse(clientReport({ timestamp: `${DAY}T11:00:00.000Z` })),
      {
        reportId: id,
        projectId: PROJECT,
        keyId: "(any)",
        receivedAt: 0,
      },
    );
    let s: Awaited<ReturnType<typeof storedReport>> | undefined;
    await eventually(async () => {
      s = await storedReport(id);
    });
    if (!s) throw new Error("unreachable");
    const { key_id: _k, received_at: _r, ...sameColumns } = expected;
    expect(s.record).toMatchObject({ ...sameColumns, headers: null, error: null });
    expect(s.windows).toEqual(cellsOf(windowsOfRecord(s.record)));
    expect(s.windows[5]).toBe("limits@1");
  });
});

describe("migration 9: the windows' rollups", () => {
  it("rolls up the windows of the reports stored before it, as its views do those after", async () => {
    const db = `${p.db}_m9_${uniqueId()}`;
    const ctx = { db, retentionDays: 30 };
    const q = async (sql: string) =>
      (await p.client.query({ query: sql, format: "JSONEachRow" })).json();
    const merged = (from: string) =>
      q(`SELECT toString(bucket) AS b, dimension, \`window\`, max(limit_max) AS l, min(remaining_min) AS r
        FROM (${from}) GROUP BY b, dimension, \`window\` ORDER BY b, dimension, \`window\``);
    const rows = (n: number, offset: number) =>
      Array.from({ length: n }, (_, i) =>
        toRow(
          toRecord(
            reportBodySchema.parse(
              clientReport({
                provider: "anthropic",
                timestamp: `${DAY}T10:${String((offset + i) % 60).padStart(2, "0")}:00.000Z`,
              }),
            ),
            {
              reportId: `0190a000-0000-7000-8000-${String(offset + i).padStart(12, "0")}`,
              projectId: "p-m9",
              keyId: "key_test",
              receivedAt: Date.now(),
            },
            { headers: JSON.stringify(ANTHROPIC_KEPT), error: null },
          ),
        ),
      );
    try {
      // Every migration but 9: the rows below are of this release's shape, whose columns later
      // migrations add.
      await migrate(
        p.client,
        ctx,
        () => {},
        MIGRATIONS.filter((m) => m.version !== 9),
      );
      await createReportSink(p.client, db).insert(rows(20, 0), `m9-before-${db}`);
      expect(await migrate(p.client, ctx, () => {})).toEqual([9]);
      await createReportSink(p.client, db).insert(rows(20, 20), `m9-after-${db}`);
      const fromReports = await merged(
        windowRollupSelect("toStartOfMinute(timestamp)", `${db}.reports FINAL`),
      );
      expect(fromReports.length).toBeGreaterThan(40);
      expect(await merged(`SELECT * FROM ${db}.report_windows_minute`)).toEqual(fromReports);
    } finally {
      await p.client.command({ query: `DROP DATABASE IF EXISTS ${db}` });
    }
  });
});

describe("headroom rederive-windows", () => {
  const project = `p-rederive-${uniqueId()}`;
  /** A newer parser: today's windows, and one more for each report with Anthropic's input-tokens headers. */
  const newer = (record: Parameters<typeof windowsOfRecord>[0]): DerivedWindows => {
    const base = windowsOfRecord(record);
    const h = record.headers ? (JSON.parse(record.headers) as Record<string, string>) : {};
    const limit = h["anthropic-ratelimit-input-tokens-limit"];
    const extra =
      limit === undefined
        ? []
        : [
            {
              dimension: "rederived_input_tokens",
              window: "1m" as const,
              limit: Number(limit),
              remaining: Number(h["anthropic-ratelimit-input-tokens-remaining"]),
              resets_at: Date.parse(h["anthropic-ratelimit-input-tokens-reset"] ?? ""),
            },
          ];
    return { ...base, windows: [...base.windows, ...extra], parser: "test-anthropic@2" };
  };

  const figures = async () => {
    const q = async (sql: string) =>
      (
        await p.client.query({ query: sql, query_params: { p: project }, format: "JSONEachRow" })
      ).json();
    return {
      raw: await q(`SELECT count() AS n FROM ${p.db}.reports WHERE project_id = {p:String}`),
      view: await q(
        `SELECT count() AS n, sum(requests_remaining) AS r FROM ${p.db}.reports_v WHERE project_id = {p:String}`,
      ),
      minute: await q(
        `SELECT bucket, reports, hints, requests_remaining_min, tokens_limit_max, cost_sum FROM ${p.db}.reports_minute_v WHERE project_id = {p:String} ORDER BY bucket`,
      ),
      daily: await q(
        `SELECT bucket, reports, requests_remaining_min FROM ${p.db}.reports_daily_v WHERE project_id = {p:String} ORDER BY bucket`,
      ),
      latest: await q(
        `SELECT * EXCEPT (last_seen, limits_at, credits_at) FROM ${p.db}.latest_limits_v WHERE project_id = {p:String}`,
      ),
    };
  };
  const windowRows = async () =>
    (
      await p.client.query({
        query: `SELECT report_id, dimension, count() AS n FROM ${p.db}.report_windows_v
          WHERE project_id = {p:String} GROUP BY report_id, dimension ORDER BY report_id, dimension`,
        query_params: { p: project },
        format: "JSONEachRow",
      })
    ).json<{ report_id: string; dimension: string; n: string }>();

  /** The minute windows' rollup of the project, merged, and the same made from `reports` now. */
  const windowRollup = async () => {
    const q = async (sql: string) =>
      (
        await p.client.query({ query: sql, query_params: { p: project }, format: "JSONEachRow" })
      ).json();
    const merged = (from: string) =>
      `SELECT toString(bucket) AS b, dimension, \`window\`, max(limit_max) AS l, min(remaining_min) AS r
        FROM (${from}) WHERE project_id = {p:String}
        GROUP BY b, dimension, \`window\` ORDER BY b, dimension, \`window\``;
    return {
      rollup: await q(merged(`SELECT * FROM ${p.db}.report_windows_minute`)),
      fromReports: await q(
        merged(windowRollupSelect("toStartOfMinute(timestamp)", `${p.db}.reports FINAL`)),
      ),
    };
  };

  it("rewrites the windows once in every view, and a second run changes nothing", async () => {
    const records = Array.from({ length: 30 }, (_, i) =>
      toRecord(
        reportBodySchema.parse(
          clientReport({
            provider: "anthropic",
            timestamp: `${DAY}T12:${String(i).padStart(2, "0")}:00.000Z`,
          }),
        ),
        {
          reportId: `0190a000-0000-7000-8000-${String(i).padStart(12, "0")}`,
          projectId: project,
          keyId: "key_test",
          receivedAt: Date.now(),
        },
        // Every other report carries Anthropic's headers; the rest are the client's alone.
        i % 2 === 0 ? { headers: JSON.stringify(ANTHROPIC_KEPT), error: null } : undefined,
      ),
    );
    await createReportSink(p.client, p.db).insert(records.map(toRow), `rederive-${project}`);
    const before = await figures();
    const windowsBefore = await windowRows();
    const rollupBefore = await windowRollup();
    expect(rollupBefore.rollup).toEqual(rollupBefore.fromReports);
    expect(windowsBefore.every((w) => Number(w.n) === 1)).toBe(true);

    const ctx = { db: p.db, retentionDays: 30 };
    const first = await rederiveWindows(p.client, ctx, { project, derive: newer, chunk: 7 });
    expect(first).toMatchObject({ read: 30, changed: 30 });
    expect(await figures()).toEqual(before);
    const second = await rederiveWindows(p.client, ctx, { project, derive: newer, chunk: 7 });
    expect(second).toEqual({ read: 30, changed: 0, mutations: 0 });

    // Every figure as it was; the windows are the new parser's, each once.
    expect(await figures()).toEqual(before);
    const after = await windowRows();
    expect(after.every((w) => Number(w.n) === 1)).toBe(true);
    expect(after.filter((w) => w.dimension === "rederived_input_tokens")).toHaveLength(15);
    // The windows' rollup (what /usage reads) holds the new windows, and nothing of the old.
    const rollupAfter = await windowRollup();
    expect(rollupAfter.rollup).toEqual(rollupAfter.fromReports);
    expect(rollupAfter.rollup).not.toEqual(rollupBefore.rollup);
    for (const r of records) {
      const s = await storedReport(r.report_id);
      expect(s.windows).toEqual(cellsOf(newer(s.record)));
    }
    // Scoped: another project's reports are not read.
    expect(
      await rederiveWindows(p.client, ctx, { project: `${project}-none`, derive: newer }),
    ).toEqual({
      read: 0,
      changed: 0,
      mutations: 0,
    });
  });

  it("tells apart two stored reports sharing a client id: each read, each given its own windows", async () => {
    const shared = `p-shared-${uniqueId()}`;
    const id = "0190a000-0000-7000-8000-0000000000ff";
    // The id reused a day later (after the edge's deduplication window), with other content: the
    // first carries Anthropic's headers (a window more with the newer parser), the second not.
    const records = [`${DAY}T08:00:00.000Z`, `${DAY}T09:00:00.000Z`].map((timestamp, i) =>
      toRecord(
        reportBodySchema.parse(clientReport({ provider: "anthropic", timestamp })),
        { reportId: id, projectId: shared, keyId: "key_test", receivedAt: Date.now() + i },
        i === 0 ? { headers: JSON.stringify(ANTHROPIC_KEPT), error: null } : undefined,
      ),
    );
    await createReportSink(p.client, p.db).insert(records.map(toRow), `rederive-${shared}`);
    const ctx = { db: p.db, retentionDays: 30 };
    // One report a page: a cursor on the id alone skips the second.
    expect(
      await rederiveWindows(p.client, ctx, { project: shared, derive: newer, chunk: 1 }),
    ).toMatchObject({ read: 2, changed: 2 });
    const rs = await p.client.query({
      query: `SELECT ${REPORT_COLUMNS.join(", ")}, ${WINDOWS.join(", ")} FROM ${p.db}.reports_v
        WHERE project_id = {p:String} ORDER BY timestamp`,
      query_params: { p: shared },
      format: "JSONCompactEachRow",
      clickhouse_settings: {
        output_format_json_quote_64bit_integers: 0,
        output_format_json_quote_decimals: 0,
      },
    });
    const rows = await rs.json<unknown[]>();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      const record = Object.fromEntries(REPORT_COLUMNS.map((c, i) => [c, row[i]])) as Record<
        string,
        unknown
      >;
      for (const c of ["timestamp", "received_at"])
        record[c] = `${String(record[c]).replace(" ", "T")}Z`;
      expect(row.slice(REPORT_COLUMNS.length)).toEqual(
        cellsOf(newer(record as unknown as ReportRecord)),
      );
    }
    // Done: a second run, a page at a time, finds nothing to change.
    expect(
      await rederiveWindows(p.client, ctx, { project: shared, derive: newer, chunk: 1 }),
    ).toEqual({ read: 2, changed: 0, mutations: 0 });
  });
});
