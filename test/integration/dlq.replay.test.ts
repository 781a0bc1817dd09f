import { spawnSync } from "node:child_process";
import { UnrecoverableError, Worker } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { createReportSink } from "../../src/clickhouse/report-sink.js";
import { createLogger } from "../../src/lib/logger.js";
import { jobData } from "../../src/queue/job-rows.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { createWorkerRedis } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import { REPORT_COLUMNS, reportIdOf } from "../../src/report/report-schema.js";
import { createIngestWorker, type IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { expireFailedJobs } from "../../src/worker/failed-job-retention.js";
import { createIngestProcessor } from "../../src/worker/ingest-processor.js";
import { createRedisManifestStore } from "../../src/worker/manifest-store.js";
import { sweepManifests } from "../../src/worker/manifest-sweep.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";

// A job that failed for some other reason after its batch landed, replayed once ClickHouse's
// deduplication window no longer holds that batch (the next day, at production rates): each of
// its reports is stored once, and its batch-mates are not stored again. Failed jobs and their
// manifests go after DLQ_RETENTION_DAYS.

let p: Pipeline;
const DEDUP_TABLES = ["reports", "reports_minute", "reports_daily", "latest_limits"];

beforeAll(async () => {
  p = await startPipeline();
});

afterAll(async () => {
  await p?.close();
});

const keyPrefix = () => `${p.config.QUEUE_PREFIX}:${p.config.QUEUE_NAME}`;

function cli(args: string[]) {
  return spawnSync(process.execPath, ["bin/headroom.mjs", ...args], {
    env: { ...process.env, ...p.env },
    encoding: "utf8",
  });
}

/**
 * Three jobs inserted as one batch (one manifest) by a holder that then fails the first job for
 * good, as a worker crash or a bug after the insert would; the other two complete. Their rows are
 * flat, as single reports' are, or grouped, as a batch request's are (each job one request's).
 */
async function batchWithOneFailedJob(proj: string, form: "flat" | "grouped" = "flat") {
  const rows = Array.from({ length: 15 }, (_, i) => sampleRow(i, proj));
  const received = REPORT_COLUMNS.indexOf("received_at");
  if (form === "grouped") for (const r of rows) r[received] = rows[0]?.[received] ?? null;
  const jobs = await p.queue.addBulk(
    [0, 1, 2].map((j) => {
      const slice = rows.slice(j * 5, j * 5 + 5);
      const data = form === "grouped" ? jobData(slice) : { v: 1, rows: slice };
      expect(data.groups === undefined).toBe(form === "flat");
      return { name: REPORT_JOB, data };
    }),
  );
  const failing = String(jobs[0]?.id);
  const connection = createWorkerRedis(redisTopology(p.config));
  const processor = createIngestProcessor({
    sink: createReportSink(p.client, p.db),
    manifests: createRedisManifestStore(connection, keyPrefix()),
    maxRows: 1_000,
    maxWaitMs: 500,
    maxJobs: 3,
    maxParallelInserts: 1,
    retryMaxDelayMs: 100,
    deadLetter: async () => {},
    logger: createLogger("silent", "test"),
    metrics: createWorkerMetrics(),
  });
  const holder = new Worker(
    p.config.QUEUE_NAME,
    async (j, token) => {
      await processor.process(j, token ?? "");
      if (String(j.id) === failing) throw new UnrecoverableError("failed after its batch landed");
    },
    { connection, prefix: p.config.QUEUE_PREFIX, concurrency: 3 },
  );
  await eventually(async () =>
    // Completed jobs are removed at once (removeOnComplete).
    expect(await p.queue.getJobCounts("failed", "wait", "active")).toStrictEqual({
      failed: 1,
      wait: 0,
      active: 0,
    }),
  );
  await holder.close();
  await connection.quit();
  expect(await p.rawCount(proj)).toBe(15);
  // The failed job still owns the batch's manifest.
  expect(await p.redis.hget(`${keyPrefix()}:manifest-owners`, failing)).not.toBeNull();
  return { failing, rows };
}

it.each(["flat", "grouped"] as const)(
  "a replay after the deduplication window stores each report once, and no batch-mate again (%s rows)",
  {
    timeout: 120_000,
  },
  async (form) => {
    const proj = `p-${uniqueId()}`;
    const { failing, rows } = await batchWithOneFailedJob(proj, form);
    // The next day: the batch's token has left ClickHouse's deduplication window.
    for (const t of DEDUP_TABLES) {
      await p.client.command({
        query: `ALTER TABLE ${p.db}.${t} MODIFY SETTING non_replicated_deduplication_window = 0`,
      });
    }

    const list = cli(["dlq", "list", "--json"]);
    expect(list.status, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toContainEqual(
      expect.objectContaining({ id: failing, rows: 5 }),
    );
    const replay = cli(["dlq", "replay", failing]);
    expect(replay.status, replay.stderr).toBe(0);
    expect(replay.stdout).toContain("(5 rows)");
    const metrics = createWorkerMetrics();
    const worker: IngestWorker = createIngestWorker({
      config: p.config,
      redis: p.redis,
      clickhouse: p.client,
      logger: createLogger("silent", "test"),
      metrics,
    });
    worker.start();
    try {
      await eventually(
        async () =>
          expect(await p.queue.getJobCounts("failed", "wait", "active")).toStrictEqual({
            failed: 0,
            wait: 0,
            active: 0,
          }),
        { timeoutMs: 30_000 },
      );
      expect(await p.rawCount(proj)).toBe(15);
      expect(await p.rollupCount(proj)).toBe(15);
      const replayed = await metrics.replayedRows.get();
      expect(replayed.values.map((v) => [v.labels.outcome, v.value]).sort()).toEqual([
        ["already_stored", 5],
        ["stored", 0],
      ]);

      // A report of the job that had not landed (say it was lost) is stored by a second replay,
      // once; the others are not stored again.
      const lost = reportIdOf(rows[2] as (typeof rows)[number]);
      await p.client.command({
        query: `ALTER TABLE ${p.db}.reports DELETE WHERE report_id = '${lost}'`,
        clickhouse_settings: { mutations_sync: "2" },
      });
      await p.queue.add(REPORT_JOB, { v: 1, rows: rows.slice(0, 5), replay: true });
      await eventually(async () => expect(await p.distinctCount(proj)).toBe(15), {
        timeoutMs: 30_000,
      });
      await eventually(async () =>
        expect(await p.queue.getJobCounts("wait", "active")).toStrictEqual({ wait: 0, active: 0 }),
      );
      expect(await p.rawCount(proj)).toBe(15);
      expect(await p.distinctCount(proj)).toBe(15);
    } finally {
      await worker.close();
    }
  },
);

it("failed jobs expire after the retention, and the manifests they held go with them", {
  timeout: 60_000,
}, async () => {
  const proj = `p-${uniqueId()}`;
  const { failing } = await batchWithOneFailedJob(proj);
  const status = () => {
    const r = cli(["dlq", "status", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    return (
      JSON.parse(r.stdout) as {
        retention_days: number;
        shards: { failed_jobs: number; manifests: number; oldest_expires_at: string | null }[];
      }
    ).shards[0];
  };
  const before = status();
  expect(before?.failed_jobs).toBe(1);
  expect(Date.parse(before?.oldest_expires_at ?? "")).toBeGreaterThan(Date.now());

  const metrics = createWorkerMetrics();
  const store = createRedisManifestStore(p.redis, keyPrefix());
  // Within the retention the job stays; a failed job's manifest is released all the same.
  expect(await expireFailedJobs(p.queue, 86_400_000, metrics)).toBe(0);
  expect(await sweepManifests(p.redis, keyPrefix(), store)).toBe(0);
  expect(await p.redis.hget(`${keyPrefix()}:manifest-owners`, failing)).toBeNull();
  expect(await p.redis.keys(`${keyPrefix()}:manifest:*`)).toEqual([]);
  expect(await p.queue.getFailedCount()).toBe(1);

  // Past the retention it goes, counted.
  await eventually(async () => expect(await expireFailedJobs(p.queue, 1, metrics)).toBe(1));
  expect((await metrics.failedJobsExpired.get()).values[0]?.value).toBe(1);
  expect((await metrics.failedJobs.get()).values[0]?.value).toBe(0);
  expect(status()).toMatchObject({ failed_jobs: 0, manifests: 0, oldest_expires_at: null });
});
