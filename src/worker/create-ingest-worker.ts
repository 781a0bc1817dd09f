import { createHash } from "node:crypto";
import type { ClickHouseClient } from "@clickhouse/client";
import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import type { Logger } from "pino";
import { createAlertsHook } from "../alerts/ingest-hook.js";
import { createEvalQueue } from "../alerts/queues.js";
import { createRuleCache } from "../alerts/rule-cache.js";
import { createRuleStore } from "../alerts/rule-store.js";
import { createHotStore } from "../api/hot-store.js";
import { describeError } from "../clickhouse/classify-error.js";
import { createReportSink } from "../clickhouse/report-sink.js";
import type { Config } from "../config.js";
import { ShutdownAbort } from "../lib/retry.js";
import {
  createReportsQueue,
  type QueueNames,
  REPORT_JOB,
  type ReportJobData,
} from "../queue/reports-queue.js";
import { duplicateWith, isCommandTimeout, type RedisClient } from "../redis/connections.js";
import { reportIdOf } from "../report/report-schema.js";
import {
  createManifestReleaser,
  createRedisManifestStore,
  type Manifest,
} from "./batch-manifests.js";
import { createHotHeadroomHook } from "./hot-headroom-hook.js";
import { createIngestProcessor } from "./ingest-processor.js";
import type { WorkerMetrics } from "./metrics.js";
import { createStallWatchdog } from "./stall-watchdog.js";

// One ingest worker: a BullMQ Worker whose processor hands each job to the batching processor.

export interface IngestWorkerDeps {
  config: Pick<
    Config,
    | "QUEUE_PREFIX"
    | "QUEUE_NAME"
    | "CLICKHOUSE_DATABASE"
    | "CLICKHOUSE_CLUSTER"
    | "BATCH_MAX_ROWS"
    | "BATCH_MAX_WAIT_MS"
    | "WORKER_CONCURRENCY"
    | "RETRY_MAX_DELAY_MS"
    | "WORKER_LOCK_DURATION_MS"
    | "WORKER_STALLED_INTERVAL_MS"
    | "ALERTS_ENABLED"
    | "ALERTS_RULES_TTL_MS"
    | "REDIS_ACK_REPLICAS"
    | "REDIS_ACK_TIMEOUT_MS"
    | "READ_HOT_MAX_SERIES_PER_PROJECT"
    | "READ_HOT_SERIES_TTL_S"
  >;
  /** A worker-role connection (maxRetriesPerRequest: null). */
  redis: RedisClient;
  /** The queue shard to consume (src/queue/shards.ts); QUEUE_PREFIX and QUEUE_NAME if unset. */
  shard?: QueueNames;
  clickhouse: ClickHouseClient;
  logger: Logger;
  metrics: WorkerMetrics;
}

function isValidJob(data: unknown): data is ReportJobData {
  const d = data as ReportJobData | null;
  return (
    d !== null && typeof d === "object" && Array.isArray(d.rows) && d.rows.every(Array.isArray)
  );
}

/** BullMQ moves a job to the failed set once it stalled more often than this: never, in practice. */
const UNLIMITED_STALLS = Number.MAX_SAFE_INTEGER;
const MANIFEST_SWEEP_MS = 60_000;

export function createIngestWorker(deps: IngestWorkerDeps) {
  const { config, logger } = deps;
  const names = deps.shard ?? { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME };
  const queue = createReportsQueue(deps.redis, names);
  // Without a listener BullMQ prints connection errors as raw stack traces on stderr.
  queue.on("error", (err) => logger.warn({ err: err.message }, "queue error"));
  // BullMQ's keys of this queue: `prefix:name:…`; the manifests live beside them (same hash tag).
  const keyPrefix = `${names.prefix}:${names.name}`;
  const manifests = createRedisManifestStore(deps.redis, keyPrefix, {
    ackReplicas: config.REDIS_ACK_REPLICAS,
    ackTimeoutMs: config.REDIS_ACK_TIMEOUT_MS,
  });
  // Alerts: stored rows that a rule watches go to the alerts worker (src/alerts/ingest-hook.ts).
  // The alerts live under the base prefix, whichever shard this worker consumes.
  const evalQueue = config.ALERTS_ENABLED ? createEvalQueue(deps.redis, config.QUEUE_PREFIX) : null;
  evalQueue?.on("error", (err) => logger.warn({ err: err.message }, "alerts queue error"));
  const alertsHook = evalQueue
    ? createAlertsHook({
        rules: createRuleCache(
          createRuleStore(deps.redis, config.QUEUE_PREFIX),
          config.ALERTS_RULES_TTL_MS,
        ),
        queue: evalQueue,
      })
    : undefined;
  // The read API's hot headroom (src/api/hot-store.ts), under the base prefix like the alerts.
  const hotHook = createHotHeadroomHook({
    store: createHotStore(deps.redis, config.QUEUE_PREFIX, {
      maxSeriesPerProject: config.READ_HOT_MAX_SERIES_PER_PROJECT,
      ttlMs: config.READ_HOT_SERIES_TTL_S * 1000,
    }),
    logger,
  });
  const onStored = async (manifest: Manifest) => {
    await hotHook(manifest);
    await alertsHook?.(manifest);
  };
  const processor = createIngestProcessor({
    sink: createReportSink(deps.clickhouse, config.CLICKHOUSE_DATABASE, config.CLICKHOUSE_CLUSTER),
    manifests,
    maxRows: config.BATCH_MAX_ROWS,
    maxWaitMs: config.BATCH_MAX_WAIT_MS,
    maxJobs: config.WORKER_CONCURRENCY,
    // Two: one batch fills (and is serialised) while the other is being inserted.
    maxParallelInserts: 2,
    retryMaxDelayMs: config.RETRY_MAX_DELAY_MS,
    logger,
    metrics: deps.metrics,
    onStored,
    deadLetter: async (job, rows, reason) => {
      // A deterministic id: a redelivered job dead-letters the same rows only once.
      const digest = createHash("sha256")
        .update(rows.map(reportIdOf).join(","))
        .digest("hex")
        .slice(0, 16);
      await queue.add(
        REPORT_JOB,
        { v: 1, rows, dead: { reason, from: String(job.id) } },
        { jobId: `dead-${job.id}-${digest}`, attempts: 1 },
      );
    },
  });

  // For the stall watchdog: jobs started or finished so far, and jobs in hand now.
  let progress = 0;
  let held = 0;
  const worker = new Worker<ReportJobData, void, string>(
    names.name,
    async (job: Job<ReportJobData>, token?: string) => {
      progress += 1;
      held += 1;
      try {
        // A dead-letter job fails at once, with its reason, and waits in the failed set.
        if (job.data?.dead) throw new UnrecoverableError(job.data.dead.reason);
        if (!isValidJob(job.data))
          throw new UnrecoverableError("malformed job: expected { rows: [[...]] }");
        await processor.process(job, token ?? "");
      } catch (err) {
        if (err instanceof ShutdownAbort && token) {
          // Back to the queue without using up an attempt: this was our shutdown, not the job.
          await job.moveToDelayed(Date.now() + 1_000, token);
          throw new DelayedError();
        }
        throw err;
      } finally {
        progress += 1;
        held -= 1;
      }
    },
    {
      connection: deps.redis,
      prefix: names.prefix,
      concurrency: config.WORKER_CONCURRENCY,
      autorun: false,
      lockDuration: config.WORKER_LOCK_DURATION_MS,
      stalledInterval: config.WORKER_STALLED_INTERVAL_MS,
      // A stalled job is redelivered as often as it takes: its manifest makes every retry an
      // exact repeat, so it can never be counted twice, and it never lands in the failed set
      // (that set holds only rows ClickHouse refused).
      maxStalledCount: UNLIMITED_STALLS,
    },
  );
  worker.on("stalled", () => deps.metrics.stalls.inc());
  const releaser = createManifestReleaser({
    store: manifests,
    redis: deps.redis,
    keyPrefix,
    sweepMs: MANIFEST_SWEEP_MS,
    onError: (what, err) => logger.warn({ err: describeError(err) }, `manifest ${what} failed`),
  });
  worker.on("completed", (job) => {
    if (!job.data?.dead) releaser.completed(String(job.id));
  });
  worker.on("error", (err) => logger.warn({ err: err.message }, "worker error"));
  worker.on("failed", (job, err) => {
    if (job?.data?.dead) return;
    logger.error(
      { jobId: job?.id, err: err.message, attemptsMade: job?.attemptsMade },
      "job failed",
    );
  });

  let closing = false;
  const run = () => {
    void worker
      .run()
      .catch((err: unknown) => logger.error({ err }, "worker stopped with an error"));
  };

  // The watchdog's own view of the queue: a connection whose commands time out (and which is
  // replaced when one does), so it cannot hang the way the worker's connection can.
  const probeRedis = duplicateWith(deps.redis, {
    commandTimeout: 2_000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
  });
  probeRedis.on("error", () => {});
  const probe = createReportsQueue(probeRedis, names);
  probe.on("error", () => {});
  const stallMs = Math.max(config.WORKER_LOCK_DURATION_MS, config.WORKER_STALLED_INTERVAL_MS);
  const watchdog = createStallWatchdog({
    stallMs,
    intervalMs: Math.max(250, Math.floor(stallMs / 4)),
    progress: () => progress,
    hasRoom: () => held < config.WORKER_CONCURRENCY,
    waiting: async () => {
      try {
        return await probe.getWaitingCount();
      } catch (err) {
        // Unanswered: the probe's own connection may be the dead kind. A new one.
        if (isCommandTimeout(err)) probeRedis.disconnect(true);
        throw err;
      }
    },
    recover: async ({ waiting, idleMs }) => {
      if (closing) return;
      logger.warn(
        { waiting, idleMs },
        "worker stalled: jobs are waiting but none was taken; reconnecting to Redis",
      );
      // Drops the worker's connection (destroyed if it does not close within ioredis's
      // disconnectTimeout) and connects again; commands still unanswered are sent again.
      deps.redis.disconnect(true);
      if (!worker.isRunning()) run();
    },
  });

  return {
    worker,
    queue,
    processor,
    watchdog,
    start() {
      releaser.start();
      run();
      watchdog.start();
    },
    /** Stop taking jobs, flush what is in hand, ack it, close. */
    async close(graceMs = 20_000) {
      closing = true;
      await watchdog.stop();
      const workerClosed = worker.close();
      await processor.close(graceMs);
      await workerClosed;
      await releaser.stop();
      await queue.close();
      await evalQueue?.close();
      await probe.close();
      probeRedis.disconnect();
    },
  };
}

export type IngestWorker = ReturnType<typeof createIngestWorker>;
