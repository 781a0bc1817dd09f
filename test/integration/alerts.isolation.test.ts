import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { REPORT_COLUMNS } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { type AlertsFixture, alertsFixture, usageRow } from "../helpers/alerts-fixture.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Issue 42, defect 1: one tenant's report never silences another tenant's alerts. Project A sends
// a report with "reset_requests_ms": 9e15 (a valid Int64, past any time a Date can write) while
// its own rule fires; project B's 95 % report lands in the same alerts batch. B's critical
// webhook arrives, and A's own GET /api/v1/headroom answers 200: through the real edge, ingest
// worker, alerts worker and read API. A row stored before the edge bounded resets (queued as the
// old edge queued it) is read the same way.

const logger = createLogger("silent", "test");
let p: Pipeline;
let fx: AlertsFixture;
let edge: Edge;
let api: Api;
let ingest: IngestWorker | undefined;
let alerts: AlertsWorker | undefined;
const receivers: Receiver[] = [];
const secrets = new Map<string, string>();

beforeAll(async () => {
  // One ingest batch for what is queued before the worker starts: a wait long enough to take it all.
  p = await startPipeline({
    ALERTS_RULES_TTL_MS: "0",
    BATCH_MAX_WAIT_MS: "500",
    READ_CACHE_TTL_MS: "0",
    READ_HEADROOM_TTL_MS: "0",
  });
  fx = alertsFixture(p);
  edge = await createEdge(p.config, logger);
  api = await createApi(p.config, logger, { clickhouse: p.client });
});

afterEach(async () => {
  await alerts?.close(1_000);
  await ingest?.close();
  alerts = undefined;
  ingest = undefined;
  for (const r of receivers.splice(0)) await r.close();
});

afterAll(async () => {
  await api?.close();
  await edge?.queue.obliterate({ force: true }).catch(() => {});
  await edge?.close();
  await fx?.close();
  await p?.close();
});

/** A project with a report key, a read key, and a requests rule (70/90) to a receiver of its own. */
async function project() {
  const name = `iso-${uniqueId()}`;
  const key = async (scope: "report" | "read") =>
    (await edge.keyStore.create(name, { defaultPlan: "unlimited", scope })).key;
  const receiver = await startReceiver(() => secrets.get(name));
  receivers.push(receiver);
  const { rule, secret } = await fx.rules.create({
    project: name,
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    cooldown_s: 0,
    webhook: receiver.url,
  });
  secrets.set(name, secret);
  return { name, rule, receiver, report: await key("report"), read: await key("read") };
}

async function post(key: string, body: Record<string, unknown>) {
  const res = await edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { id: string; warnings?: { path: string; message: string }[] };
}

const report = (remaining: number, resetMs: number) => ({
  provider: "openai",
  model: "gpt-4o",
  app: "chat",
  limits: { requests_limit: 1000, requests_remaining: remaining, reset_requests_ms: resetMs },
});

/** Starts the workers once everything is queued, and waits for the one alerts batch of both. */
async function runBatchOf(projects: string[]) {
  ingest = startIngestWorker(p, logger);
  // The scenario itself: both projects' rows in one alerts job.
  const at = REPORT_COLUMNS.indexOf("project_id");
  await eventually(
    async () => {
      const jobs = await fx.evalQueue.getJobs(["wait"]);
      const ours = jobs.filter((j) => j.data.rows.some((r) => projects.includes(String(r[at]))));
      expect(ours.map((j) => new Set(j.data.rows.map((r) => r[at])))).toEqual([new Set(projects)]);
    },
    { timeoutMs: 30_000 },
  );
  alerts = createAlertsWorker({
    config: p.config,
    redis: p.redis,
    clickhouse: p.client,
    logger,
  });
  alerts.start();
}

const critical = (r: Receiver) =>
  eventually(
    () => {
      const levels = r.accepted().map((d) => d.json.data.level);
      expect(levels).toEqual(["critical"]);
      return r.accepted()[0] as NonNullable<ReturnType<Receiver["accepted"]>[number]>;
    },
    // Without isolation the batch fails and is retried after 1 s, 2 s, 4 s… never sending.
    { timeoutMs: 20_000, intervalMs: 50 },
  );

async function headroomOf(read: string) {
  const res = await api.app.inject({
    method: "GET",
    url: "/api/v1/headroom",
    headers: { authorization: `Bearer ${read}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as {
    series: { requests: { resets_at: string | null; used_pct: number | null } }[];
  };
}

it("a reset of 9e15 ms from A, whose rule fires, does not stop B's critical webhook in the same batch; A's headroom answers", {
  timeout: 120_000,
}, async () => {
  const a = await project();
  const b = await project();
  const answer = await post(a.report, report(50, 9e15));
  await post(b.report, report(50, 60_000));
  await runBatchOf([a.name, b.name]);

  const fromB = await critical(b.receiver);
  expect(fromB.valid).toBe(true);
  expect(fromB.json.data).toMatchObject({ project: b.name, used_pct: 95, reset_ms: 60_000 });
  // A's own alert too: its reset is unknown, not a failed batch.
  expect((await critical(a.receiver)).json.data).toMatchObject({ project: a.name, reset_ms: null });

  const [series] = (await headroomOf(a.read)).series;
  expect(series?.requests).toMatchObject({ used_pct: 95, resets_at: null });
  // Stored as null, and the sender told so.
  expect(answer.warnings).toEqual([
    { path: "limits.reset_requests_ms", message: expect.stringMatching(/within a year/) },
  ]);
});

it("a row stored before resets were bounded (9e15 ms) fails no one's alerts, and its headroom answers", {
  timeout: 120_000,
}, async () => {
  const a = await project();
  const b = await project();
  // As the edge queued it before the bound: the reset stored as sent.
  const old = usageRow(a.name, 95);
  old[REPORT_COLUMNS.indexOf("reset_requests_ms")] = 9e15;
  await p.queue.add(REPORT_JOB, { v: ROW_SHAPES.current, rows: [old, usageRow(b.name, 95)] });
  await runBatchOf([a.name, b.name]);

  expect((await critical(b.receiver)).json.data).toMatchObject({ project: b.name });
  expect((await critical(a.receiver)).json.data).toMatchObject({ project: a.name, reset_ms: null });
  const [series] = (await headroomOf(a.read)).series;
  expect(series?.requests).toMatchObject({ used_pct: 95, resets_at: null });
});
