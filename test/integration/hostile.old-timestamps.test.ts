import { afterAll, beforeAll, expect, it, onTestFinished } from "vitest";
import { CLIENT_LIMITS } from "../../fixtures/sample-reports.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { loadConfig } from "../../src/config.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { newReportId } from "../../src/report/report-id.js";
import { type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";
import { createIngestWorker } from "../../src/worker/create-ingest-worker.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startPipeline } from "../helpers/pipeline.js";

// One tenant's clock must not stop ingestion for the others. The rollups are partitioned by month
// of the client's timestamp, and ClickHouse refuses an insert that touches more than 100
// partitions with TOO_MANY_PARTS, a code that also means "merges are behind" and so is retried:
// a batch of reports dated one per month from 2000 was retried for ever, holding the worker's
// insert slots while every other tenant's reports waited behind it.

const logger = createLogger("silent", "test");
let p: Pipeline;
let edge: Edge | undefined;

beforeAll(async () => {
  p = await startPipeline();
});

afterAll(async () => {
  await edge?.close();
  await p?.close();
});

/** More partitions than ClickHouse lets one insert touch by default (100). */
const MONTHS = 110;
const monthsAgo = (n: number) => {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - n, 15, 12);
};

function datedRow(project: string, timestampMs: number): ReportRow {
  const receivedAt = Date.now();
  return toRow(
    toRecord(
      {
        provider: "openai",
        app: "default",
        model: "gpt-4o",
        timestamp: timestampMs,
        limits: { ...CLIENT_LIMITS },
        credits: null,
      },
      { reportId: newReportId(), projectId: project, keyId: "k", receivedAt },
    ),
  );
}

const scalar = (sql: string, params: Record<string, unknown>) =>
  p.client
    .query({ query: sql, query_params: params, format: "JSONCompactEachRow" })
    .then((rs) => rs.json<[string]>())
    .then((rows) => Number(rows[0]?.[0] ?? 0));

it("a batch whose rows span 110 months is stored, in reports and every rollup, beside another tenant's", {
  timeout: 90_000,
}, async () => {
  // The longest retention lets the edge pass such timestamps (as a queue filled before an
  // upgrade holds them): the worker must insert whatever the edge accepted.
  const db = `${p.db}_long`;
  await migrate(p.client, { db, retentionDays: 3_660 });
  const config = loadConfig({ ...p.env, CLICKHOUSE_DATABASE: db, RETENTION_DAYS: "3660" });
  const spread = `p-months-${uniqueId()}`;
  const other = `p-other-${uniqueId()}`;
  const spreadRows = Array.from({ length: MONTHS }, (_, i) => datedRow(spread, monthsAgo(i)));
  const otherRows = Array.from({ length: 20 }, () => datedRow(other, Date.now()));
  // One job each: the worker's batch holds both, as it would under load.
  await p.queue.addBulk([
    { name: REPORT_JOB, data: { v: 1 as const, rows: spreadRows } },
    { name: REPORT_JOB, data: { v: 1 as const, rows: otherRows } },
  ]);
  // Its own worker, closed whatever happens: the next test's edge shares this queue.
  const longWorker = createIngestWorker({
    config,
    redis: p.redis,
    clickhouse: p.client,
    logger,
    metrics: createWorkerMetrics(),
  });
  onTestFinished(() => longWorker.close());
  longWorker.start();

  await eventually(async () => expect(await p.jobCounts()).toStrictEqual(DRAINED), {
    timeoutMs: 60_000,
  });
  const count = (table: string, project: string) =>
    scalar(`SELECT sum(reports) FROM ${db}.${table} WHERE project_id = {p:String}`, { p: project });
  expect(
    await scalar(`SELECT uniqExact(report_id) FROM ${db}.reports_v WHERE project_id = {p:String}`, {
      p: spread,
    }),
  ).toBe(MONTHS);
  expect(await count("reports_minute_v", spread)).toBe(MONTHS);
  expect(await count("reports_daily_v", spread)).toBe(MONTHS);
  expect(
    await scalar(
      `SELECT uniqExact(toYYYYMM(bucket)) FROM ${db}.reports_daily_v WHERE project_id = {p:String}`,
      { p: spread },
    ),
  ).toBe(MONTHS);
  expect(await count("reports_daily_v", other)).toBe(20);
});

it("through the edge: reports dated before the retention are stored at their receive time, and another tenant's land", {
  timeout: 90_000,
}, async () => {
  edge = await createEdge(p.config, logger);
  const e = edge;
  // Closed whatever happens: the other test's worker shares this queue.
  const edgeWorker = createIngestWorker({
    config: p.config,
    redis: p.redis,
    clickhouse: p.client,
    logger,
    metrics: createWorkerMetrics(),
  });
  onTestFinished(() => edgeWorker.close());
  edgeWorker.start();
  const attacker = { projectId: `p-old-${uniqueId()}`, key: "" };
  const victim = { projectId: `p-victim-${uniqueId()}`, key: "" };
  for (const tenant of [attacker, victim]) {
    ({ key: tenant.key } = await e.keyStore.create(tenant.projectId, { defaultPlan: "unlimited" }));
  }
  const post = (key: string, body: unknown) =>
    e.app.inject({
      method: "POST",
      url: "/api/report",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      payload: JSON.stringify(body),
    });

  // Three bursts of 150 reports dated one per month from 2000-01, as the attack sent them.
  const attackIds: string[] = [];
  for (let burst = 0; burst < 3; burst++) {
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_, i) =>
        post(
          attacker.key,
          clientReport({ timestamp: new Date(Date.UTC(2000, i, 1)).toISOString() }),
        ),
      ),
    );
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { id: string; warnings: { path: string; message: string }[] };
      expect(body.warnings).toEqual([
        {
          path: "timestamp",
          message: `older than the retention of ${p.config.RETENTION_DAYS} days: stored as the receive time`,
        },
      ]);
      attackIds.push(body.id);
    }
  }
  const victimIds: string[] = [];
  for (let i = 0; i < 20; i++) {
    const res = await post(victim.key, clientReport());
    expect(res.statusCode, res.body).toBe(200);
    victimIds.push((res.json() as { id: string }).id);
  }

  const stored = (project: string) =>
    scalar(`SELECT sum(reports) FROM ${p.db}.reports_daily_v WHERE project_id = {p:String}`, {
      p: project,
    });
  await eventually(
    async () => {
      expect(await stored(victim.projectId)).toBe(20);
      expect(await stored(attacker.projectId)).toBe(450);
    },
    { timeoutMs: 60_000 },
  );
  // Stored at the time the edge received them: every report's timestamp is its received_at.
  expect(
    await scalar(
      `SELECT countIf(timestamp = received_at) FROM ${p.db}.reports_v WHERE project_id = {p:String}`,
      { p: attacker.projectId },
    ),
  ).toBe(450);
  expect(new Set(attackIds).size).toBe(450);
  expect(await p.queue.getFailedCount()).toBe(0);
});
