import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { createIngestWorker, type IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { createWorkerMetrics, type WorkerMetrics } from "../../src/worker/metrics.js";
import { alertsFixture, usageRow } from "../helpers/alerts-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";

// The alerts worker is down: the ingest worker keeps storing reports, and the alerts queue stops
// at ALERTS_QUEUE_MAX_JOBS (what is beyond it is shed and counted) instead of filling Redis.

const MAX = 2;
const BATCHES = 5;
let p: Pipeline;
let fx: ReturnType<typeof alertsFixture>;
let ingest: IngestWorker;
let metrics: WorkerMetrics;

beforeAll(async () => {
  p = await startPipeline({ ALERTS_RULES_TTL_MS: "0", ALERTS_QUEUE_MAX_JOBS: String(MAX) });
  fx = alertsFixture(p);
  metrics = createWorkerMetrics();
  ingest = createIngestWorker({
    config: p.config,
    redis: p.redis,
    clickhouse: p.client,
    logger: createLogger("silent", "test"),
    metrics,
  });
  ingest.start();
});

afterAll(async () => {
  await ingest?.close();
  await fx?.close();
  await p?.close();
});

const counter = async (name: string) =>
  (await metrics.registry.getSingleMetric(name)?.get())?.values[0]?.value ?? 0;

it("no alerts worker: every report is stored, the alerts queue stops at its bound", async () => {
  await fx.rules.create({
    project: "p-bound",
    provider: "openai",
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    webhook: "http://127.0.0.1:9/hook",
  });
  // One batch at a time: each stored batch has one watched row, one alerts job.
  for (let i = 1; i <= BATCHES; i++) {
    await p.queue.add(REPORT_JOB, { v: 1, rows: [usageRow("p-bound", 95)] });
    await eventually(async () => expect(await p.rawCount("p-bound")).toBe(i), {
      timeoutMs: 20_000,
    });
  }
  await eventually(async () =>
    expect(await counter("headroom_worker_alerts_shed_batches_total")).toBe(BATCHES - MAX),
  );
  expect(await fx.evalQueue.getWaitingCount()).toBe(MAX);
  expect(await counter("headroom_worker_alerts_shed_rows_total")).toBe(BATCHES - MAX);
  expect(await p.queue.getFailedCount()).toBe(0);
});
