import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { workerMetric } from "../../fixtures/worker-metric.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { createLogger } from "../../src/lib/logger.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { createWorkerRedis } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import { fromRow, REPORT_COLUMNS } from "../../src/report/report-schema.js";
import { createIngestProcessor } from "../../src/worker/ingest-processor.js";
import { createRedisManifestStore } from "../../src/worker/manifest-store.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startPipeline } from "../helpers/pipeline.js";

// Faults around the worker, with real processes and real signals: nothing acknowledged is lost,
// nothing is counted twice.

let p: Pipeline;
let running: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline();
});

afterEach(async () => {
  for (const w of running) w.signal("SIGKILL");
  await Promise.all(running.map((w) => w.exited));
  running = [];
  // A test that stopped ClickHouse and failed before starting it again.
  await p.ensureClickHouse();
  await p.queue.obliterate({ force: true });
});

afterAll(async () => {
  await p?.close();
});

function worker(env: Record<string, string> = {}): Proc {
  const w = startProcess("workers/ingest.ts", { ...p.env, ...env });
  running.push(w);
  return w;
}

const project = () => `p-${uniqueId()}`;

describe("worker faults", () => {
  it("SIGTERM during a batch: flushed, acked, exit code 0", async () => {
    const proj = project();
    const w = worker({ BATCH_MAX_WAIT_MS: "30000" });
    await w.waitFor(/worker ready/);
    const ids = await p.fill(20, 10, proj);
    // The batch is in hand (jobs active), waiting for its 30 s timer.
    await eventually(async () => expect(await p.queue.getActiveCount()).toBe(20), {
      timeoutMs: 10_000,
    });
    expect(await p.distinctCount(proj)).toBe(0);
    w.signal("SIGTERM");
    expect((await w.exited).code).toBe(0);
    expect(await p.distinctCount(proj)).toBe(ids.length);
    expect(await p.jobCounts()).toStrictEqual(DRAINED);
  });

  it("SIGKILL mid-batch: the jobs come back and land once", async () => {
    const proj = project();
    const first = worker({ BATCH_MAX_WAIT_MS: "30000" });
    await first.waitFor(/worker ready/);
    const ids = await p.fill(30, 10, proj);
    await eventually(async () => expect(await p.queue.getActiveCount()).toBe(30), {
      timeoutMs: 10_000,
    });
    first.signal("SIGKILL");
    await first.exited;
    const second = worker();
    await second.waitFor(/worker ready/);
    await eventually(async () => expect(await p.distinctCount(proj)).toBe(ids.length), {
      timeoutMs: 30_000,
    });
    await eventually(async () => expect(await p.queue.getActiveCount()).toBe(0), {
      timeoutMs: 10_000,
    });
    expect(await p.rawCount(proj)).toBe(ids.length);
    expect(await p.rollupCount(proj)).toBe(ids.length);
  });

  it("a job whose first holder inserted it and then failed goes in again once, as it was", async () => {
    const proj = project();
    const rows = Array.from({ length: 50 }, (_, i) => sampleRow(i, proj));
    const job = await p.queue.add(
      REPORT_JOB,
      { v: 1, rows },
      { attempts: 3, backoff: { type: "fixed", delay: 10 } },
    );
    // A first holder with the real batching and manifests inserts the job's rows, then fails
    // before the job is completed (as if the acknowledgement never reached it).
    const connection = createWorkerRedis(redisTopology(p.config));
    const keyPrefix = `${p.config.QUEUE_PREFIX}:${p.config.QUEUE_NAME}`;
    const processor = createIngestProcessor({
      sink: createReportSink(p.client, p.db),
      manifests: createRedisManifestStore(connection, keyPrefix),
      maxRows: 1_000,
      maxWaitMs: 0,
      maxJobs: 1,
      maxParallelInserts: 1,
      retryMaxDelayMs: 100,
      deadLetter: async () => {},
      logger: createLogger("silent", "test"),
      metrics: createWorkerMetrics(),
    });
    const firstHolder = new Worker(
      p.config.QUEUE_NAME,
      async (j, token) => {
        await processor.process(j, token ?? "");
        throw new Error("died after the insert, before the ack");
      },
      { connection, prefix: p.config.QUEUE_PREFIX },
    );
    await eventually(async () =>
      expect((await p.queue.getJob(String(job.id)))?.attemptsMade).toBe(1),
    );
    await firstHolder.close();
    await connection.quit();
    expect(await p.rawCount(proj)).toBe(50);

    const w = worker();
    await w.waitFor(/worker ready/);
    await eventually(
      async () =>
        expect(await p.queue.getJobCounts("active", "wait", "delayed", "completed")).toMatchObject({
          active: 0,
          wait: 0,
          delayed: 0,
        }),
      {
        timeoutMs: 20_000,
      },
    );
    await eventually(
      async () =>
        expect(await workerMetric(w, "headroom_worker_manifests_reinserted_total")).toBe(1),
      {
        timeoutMs: 10_000,
      },
    );
    // Its batch went in again with the same token and the same bytes: ClickHouse kept one copy.
    expect(await p.rawCount(proj)).toBe(50);
    expect(await p.rollupCount(proj)).toBe(50);
  });

  it("ClickHouse stopped for a while under load: no job fails for good, nothing is lost", async () => {
    const proj = project();
    const w = worker({ BATCH_MAX_WAIT_MS: "50" });
    await w.waitFor(/worker ready/);
    const before = await p.fill(20, 10, proj);
    await eventually(async () => expect(await p.distinctCount(proj)).toBe(before.length), {
      timeoutMs: 20_000,
    });

    await p.stopClickHouse("kill");
    const during = await p.fill(40, 10, proj);
    // The worker notices and retries (with the same dedup token) rather than failing jobs.
    await w.waitFor(/insert failed: retrying/, 20_000);
    await eventually(async () => expect(await p.queue.getActiveCount()).toBeGreaterThan(0), {
      timeoutMs: 10_000,
    });
    await p.startClickHouse();
    await eventually(
      async () => expect(await p.distinctCount(proj)).toBe(before.length + during.length),
      {
        timeoutMs: 30_000,
        intervalMs: 200,
      },
    );
    await eventually(async () => expect(await p.queue.getActiveCount()).toBe(0), {
      timeoutMs: 10_000,
    });
    expect(await p.queue.getFailedCount()).toBe(0);
    expect(await p.rawCount(proj)).toBe(before.length + during.length);
    expect(await p.rollupCount(proj)).toBe(before.length + during.length);
  });

  it("a poison row goes to the DLQ, its batch-mates land, and a fixed replay lands it", async () => {
    const proj = project();
    const rows = Array.from({ length: 40 }, (_, i) => sampleRow(i, proj));
    const poisonIndex = REPORT_COLUMNS.indexOf("timestamp");
    const poison = [...(rows[13] as (string | number | null)[])];
    poison[poisonIndex] = "not a time"; // forced past the edge's validation
    rows[13] = poison;
    await p.queue.add(REPORT_JOB, { v: 1, rows });
    const w = worker();
    await w.waitFor(/worker ready/);
    await eventually(async () => expect(await p.distinctCount(proj)).toBe(39), {
      timeoutMs: 20_000,
    });
    const failed = await eventually(
      async () => {
        const f = await p.queue.getFailed();
        expect(f).toHaveLength(1);
        return f[0];
      },
      { timeoutMs: 10_000 },
    );
    expect(failed?.failedReason).toMatch(/ClickHouse 41|DateTime/);
    expect(failed?.data.rows).toHaveLength(1);

    // The operator reads the row, fixes it, and replays it with the CLI.
    const shown = spawnSync(
      process.execPath,
      ["bin/headroom.mjs", "dlq", "show", String(failed?.id)],
      {
        env: { ...process.env, ...p.env },
        encoding: "utf8",
      },
    );
    expect(shown.status, shown.stderr).toBe(0);
    const report = (JSON.parse(shown.stdout) as { reports: Record<string, unknown>[] }).reports[0];
    expect(report?.timestamp).toBe("not a time");
    const fixed = {
      ...fromRow(rows[12] as (string | number | null)[]),
      ...report,
      timestamp: new Date().toISOString(),
    };
    const file = join(p.dir, "fixed.json");
    writeFileSync(file, JSON.stringify([fixed]));
    const replay = spawnSync(
      process.execPath,
      ["bin/headroom.mjs", "dlq", "replay", String(failed?.id), "--rows", file],
      { env: { ...process.env, ...p.env }, encoding: "utf8" },
    );
    expect(replay.status, replay.stderr).toBe(0);
    await eventually(async () => expect(await p.distinctCount(proj)).toBe(40), {
      timeoutMs: 20_000,
    });
    expect(await p.queue.getFailedCount()).toBe(0);
  });
});
