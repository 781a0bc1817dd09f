import type { ClickHouseClient } from "@clickhouse/client";
import { UnrecoverableError, type Worker } from "bullmq";
import type { Logger } from "pino";
import { createAlertsHook } from "../alerts/ingest-hook.js";
import { createEvalQueue } from "../alerts/queues.js";
import type { DeriveWindows } from "../alerts/row-windows.js";
import { createRuleCache } from "../alerts/rule-cache.js";
import { createRuleStore } from "../alerts/rule-store.js";
import { describeError } from "../clickhouse/classify-error.js";
import { createReportSink } from "../clickhouse/report-sink.js";
import type { Config } from "../config.js";
import { createDeclarationsReader } from "../control/declarations-cache.js";
import { createHotStore } from "../headroom/hot-store.js";
import { closeSteps } from "../lib/close-steps.js";
import type { DeclarationsReader } from "../providers/declared-limit.js";
import { isJobData } from "../queue/job-rows.js";
import {
  createReportsQueue,
  type QueueNames,
  type ReportJobData,
  type ReportsQueue,
} from "../queue/reports-queue.js";
import type { StallWatchdog } from "../queue/stall-watchdog.js";
import { createWorkerRuntime } from "../queue/worker-runtime.js";
import type { RedisClient } from "../redis/connections.js";
import { ROW_SHAPES, type RowShapes } from "../report/row-shapes.js";
import { createDeadLetterWriter } from "./dead-letter-writer.js";
import { createPoolPlacement } from "./declared-pools.js";
import { expireFailedJobs } from "./failed-job-retention.js";
import { createHotHeadroomHook } from "./hot-headroom-hook.js";
import { createIngestProcessor, type IngestProcessor } from "./ingest-processor.js";
import { createManifestReleaser } from "./manifest-releaser.js";
import { createRedisManifestStore, type Manifest } from "./manifest-store.js";
import type { WorkerMetrics } from "./metrics.js";

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
    | "BATCH_MIN_WAIT_MS"
    | "BATCH_MIN_INTERVAL_MS"
    | "WORKER_CONCURRENCY"
    | "WORKER_MAX_ROWS_IN_HAND"
    | "ENQUEUE_MAX_REPORTS"
    | "BATCH_MAX_REPORTS"
    | "RETRY_MAX_DELAY_MS"
    | "WORKER_LOCK_DURATION_MS"
    | "WORKER_STALLED_INTERVAL_MS"
    | "ALERTS_ENABLED"
    | "ALERTS_RULES_TTL_MS"
    | "ALERTS_QUEUE_MAX_JOBS"
    | "REDIS_ACK_REPLICAS"
    | "REDIS_ACK_TIMEOUT_MS"
    | "DLQ_RETENTION_DAYS"
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
  /** The row shapes this release reads and writes: src/report/row-shapes.ts's unless a test's. */
  rowShapes?: RowShapes;
  /** How the hot headroom derives a row's windows: src/providers' unless a test's. */
  deriveWindows?: DeriveWindows;
  /** Projects' declarations (their pools place rows): this Redis's, cached, unless given. */
  declarations?: DeclarationsReader;
}

const MANIFEST_SWEEP_MS = 60_000;

export interface IngestWorker {
  worker: Worker<ReportJobData, void>;
  queue: ReportsQueue;
  processor: IngestProcessor;
  watchdog: StallWatchdog;
  start(): void;
  /** Stop taking jobs, flush what is in hand, ack it, close. */
  close(graceMs?: number): Promise<void>;
}

export function createIngestWorker(deps: IngestWorkerDeps): IngestWorker {
  const { config, logger } = deps;
  const shapes = deps.rowShapes ?? ROW_SHAPES;
  const names = deps.shard ?? { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME };
  const queue = createReportsQueue(deps.redis, names);
  // Without a listener BullMQ prints connection errors as raw stack traces on stderr.
  queue.on("error", (err) => logger.warn({ err: err.message }, "queue error"));
  // BullMQ's keys of this queue: `prefix:name:…`; the manifests live beside them (same hash tag).
  const keyPrefix = `${names.prefix}:${names.name}`;
  const manifests = createRedisManifestStore(
    deps.redis,
    keyPrefix,
    {
      ackReplicas: config.REDIS_ACK_REPLICAS,
      ackTimeoutMs: config.REDIS_ACK_TIMEOUT_MS,
    },
    shapes,
  );
  // Alerts: stored rows that a rule watches go to the alerts worker (src/alerts/ingest-hook.ts).
  // The alerts live under the base prefix, whichever shard this worker consumes.
  // Declared pools and limits (docs/pools.md, docs/providers.md), read under the base prefix like
  // the alert rules: one cache for the placement of rows and the alerts hook.
  const declarations =
    deps.declarations ?? createDeclarationsReader(deps.redis, config.QUEUE_PREFIX);
  const evalQueue = config.ALERTS_ENABLED ? createEvalQueue(deps.redis, config.QUEUE_PREFIX) : null;
  evalQueue?.on("error", (err) => logger.warn({ err: err.message }, "alerts queue error"));
  const alertsHook = evalQueue
    ? createAlertsHook({
        rules: createRuleCache(
          createRuleStore(deps.redis, config.QUEUE_PREFIX),
          config.ALERTS_RULES_TTL_MS,
        ),
        queue: evalQueue,
        maxJobs: config.ALERTS_QUEUE_MAX_JOBS,
        onShed: (rows) => {
          deps.metrics.alertsShedBatches.inc();
          deps.metrics.alertsShedRows.inc(rows);
        },
        deriveWindows: deps.deriveWindows,
        declarations,
      })
    : undefined;
  // The read API's hot headroom (src/headroom/hot-store.ts), under the base prefix like the alerts.
  const hotHook = createHotHeadroomHook({
    store: createHotStore(deps.redis, config.QUEUE_PREFIX, {
      maxSeriesPerProject: config.READ_HOT_MAX_SERIES_PER_PROJECT,
      ttlMs: config.READ_HOT_SERIES_TTL_S * 1000,
    }),
    logger,
    deriveWindows: deps.deriveWindows,
  });
  const onStored = async (manifest: Manifest) => {
    const started = performance.now();
    await hotHook.onStored(manifest);
    deps.metrics.stageSeconds.observe({ stage: "hot" }, (performance.now() - started) / 1000);
    await alertsHook?.(manifest);
  };
  // Rows in hand stay within WORKER_MAX_ROWS_IN_HAND: BullMQ fetches jobs before this worker sees
  // their rows, so a job not yet read counts as the most an edge puts in one (ENQUEUE_MAX_REPORTS,
  // or a batch request's reports with ids, which go in one job: BATCH_MAX_REPORTS), and the worker
  // fetches only as many as would fit. Small jobs let it hold up to its concurrency.
  const perJob = Math.max(config.ENQUEUE_MAX_REPORTS, config.BATCH_MAX_REPORTS);
  const roomFor = (rows: number) => Math.floor((config.WORKER_MAX_ROWS_IN_HAND - rows) / perJob);
  const processor = createIngestProcessor({
    sink: createReportSink(
      deps.clickhouse,
      config.CLICKHOUSE_DATABASE,
      config.CLICKHOUSE_CLUSTER,
      shapes.columns,
    ),
    rowShapes: shapes,
    // Declared pools (docs/pools.md, step 3).
    placeRows: createPoolPlacement(declarations),
    manifests,
    maxRows: config.BATCH_MAX_ROWS,
    maxWaitMs: config.BATCH_MAX_WAIT_MS,
    minWaitMs: config.BATCH_MIN_WAIT_MS,
    minIntervalMs: config.BATCH_MIN_INTERVAL_MS,
    maxJobs: config.WORKER_CONCURRENCY,
    maxRowsInHand: Math.max(1, config.WORKER_MAX_ROWS_IN_HAND - perJob + 1),
    onHand: (jobs, rows) => runtime.limit(jobs + roomFor(rows)),
    // Batches are claimed ahead while two are being inserted: ClickHouse is never left waiting
    // for a manifest to be written.
    maxParallelBatches: 4,
    maxParallelInserts: 2,
    retryMaxDelayMs: config.RETRY_MAX_DELAY_MS,
    logger,
    metrics: deps.metrics,
    onInserting: hotHook.prepare,
    onStored,
    deadLetter: createDeadLetterWriter(queue, shapes.current),
    // Ten confirmations missed in a row: no longer a slow replica, but none there.
    replicaWaitWarnMs: 10 * config.REDIS_ACK_TIMEOUT_MS,
  });

  const runtime = createWorkerRuntime<ReportJobData>({
    names,
    redis: deps.redis,
    concurrency: config.WORKER_CONCURRENCY,
    initialJobs: roomFor(0),
    lockDurationMs: config.WORKER_LOCK_DURATION_MS,
    stalledIntervalMs: config.WORKER_STALLED_INTERVAL_MS,
    logger,
    // A stalled job is redelivered as often as it takes: its manifest makes every retry an exact
    // repeat, so it can never be counted twice.
    async process(job, token) {
      // A dead-letter job fails at once, with its reason, and waits in the failed set.
      if (job.data?.dead) throw new UnrecoverableError(job.data.dead.reason);
      if (!isJobData(job.data))
        throw new UnrecoverableError("malformed job: expected { rows: [[...]] } or { groups }");
      await processor.process(job, token);
    },
  });
  const { worker } = runtime;
  const watched = {
    queue: keyPrefix,
    activity: runtime.activity,
    oldestWaitingAt: runtime.oldestWaitingAt,
  };
  deps.metrics.watched.push(watched);
  worker.on("stalled", () => deps.metrics.stalls.inc());
  // BullMQ says so while jobs it fetched just before may not have reached the processor yet.
  worker.on("drained", () => setImmediate(processor.drained));
  const releaser = createManifestReleaser({
    store: manifests,
    redis: deps.redis,
    keyPrefix,
    sweepMs: MANIFEST_SWEEP_MS,
    beforeSweep: () =>
      expireFailedJobs(queue, config.DLQ_RETENTION_DAYS * 86_400_000, deps.metrics),
    onSwept: (held) => deps.metrics.manifestJobs.set(held),
    onError: (what, err) => logger.warn({ err: describeError(err) }, `manifest ${what} failed`),
  });
  worker.on("completed", (job) => {
    if (!job.data?.dead) releaser.completed(String(job.id));
  });
  worker.on("failed", (job, err) => {
    if (job?.data?.dead) return;
    logger.error(
      { jobId: job?.id, err: err.message, attemptsMade: job?.attemptsMade },
      "job failed",
    );
  });

  return {
    worker,
    queue,
    processor,
    watchdog: runtime.watchdog,
    start() {
      releaser.start();
      runtime.start();
    },
    // 12 s to flush, then the steps below (a few seconds each at most): within the process's 30 s.
    async close(graceMs = 12_000) {
      await runtime.close(() => processor.close(graceMs));
      deps.metrics.watched.splice(deps.metrics.watched.indexOf(watched), 1);
      await closeSteps(logger, [
        // What is not released now, the next sweep releases.
        ["manifest release", () => releaser.stop(), 2_000],
        ["queue", () => queue.close(), 2_000],
        ["evaluation queue", () => evalQueue?.close(), 2_000],
      ]);
    },
  };
}
