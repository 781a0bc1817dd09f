import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { registerWorkerGauges, type WatchedWorker } from "../queue/worker-health.js";

// Prometheus metrics of one ingest worker process, served on a port of its own
// (src/lib/metrics-server.ts), with the process's own (event-loop lag, heap, CPU).

export interface WorkerMetrics {
  registry: Registry;
  /** The workers whose jobs the gauges, the lag and the health look at. */
  watched: WatchedWorker[];
  /** ClickHouse acknowledged an insert. */
  markInserted(): void;
  /** The age of the oldest report of a batch being inserted. */
  recordLag(seconds: number): void;
  sinceLastInsert: Gauge<string>;
  batchRows: Histogram<string>;
  /** Where a report's way from the edge to the hot headroom goes (FRESHNESS_STAGES). */
  stageSeconds: Histogram<"stage">;
  /** Batches handed to ClickHouse, by what closed them (batcher.ts's CloseReason). */
  batchesClosed: Counter<"reason">;
  insertSeconds: Histogram<string>;
  rowsInserted: Counter<string>;
  failures: Counter<"kind">;
  deadLettered: Counter<string>;
  redeliveredJobs: Counter<string>;
  manifestsReinserted: Counter<string>;
  replayedRows: Counter<"outcome">;
  failedJobs: Gauge<string>;
  failedJobsExpired: Counter<string>;
  manifestJobs: Gauge<string>;
  awaitingReplicas: Gauge<string>;
  jobsLost: Counter<string>;
  stalls: Counter<string>;
  alertsShedBatches: Counter<string>;
  alertsShedRows: Counter<string>;
  lagSeconds: Gauge<string>;
}

export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const watched: WatchedWorker[] = [];
  registerWorkerGauges(registry, "headroom_worker", () => watched);
  const startedAt = Date.now();
  let lastInsertAt: number | null = null;
  let lastLagS = 0;
  return {
    registry,
    watched,
    markInserted() {
      lastInsertAt = Date.now();
    },
    recordLag(seconds: number) {
      lastLagS = seconds;
    },
    sinceLastInsert: new Gauge({
      name: "headroom_worker_seconds_since_last_insert",
      help: "Seconds since ClickHouse last acknowledged an insert of this process (since its start if none)",
      registers: [registry],
      collect() {
        this.set((Date.now() - (lastInsertAt ?? startedAt)) / 1000);
      },
    }),
    batchRows: new Histogram({
      name: "headroom_worker_batch_rows",
      help: "Rows per ClickHouse insert batch",
      buckets: [1, 10, 100, 1_000, 5_000, 10_000, 20_000, 50_000, 100_000],
      registers: [registry],
    }),
    stageSeconds: new Histogram({
      name: "headroom_worker_stage_seconds",
      help: "A report's way to /api/v1/headroom by stage: queued (edge's enqueue to this worker, per job), batched (per job), inserted (batch closed to ClickHouse's ack, per batch), hot (the hot headroom's write, per batch)",
      labelNames: ["stage"] as const,
      buckets: [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5,
        2, 3, 5, 10,
      ],
      registers: [registry],
    }),
    batchesClosed: new Counter({
      name: "headroom_worker_batches_closed_total",
      help: "Batches handed to ClickHouse by what closed them: rows (BATCH_MAX_ROWS), jobs (every job slot taken, or WORKER_MAX_ROWS_IN_HAND reached), wait (BATCH_MAX_WAIT_MS), idle (an insert slot free after BATCH_MIN_WAIT_MS), drained (end of a backlog), close (shutdown)",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
    insertSeconds: new Histogram({
      name: "headroom_worker_insert_seconds",
      help: "Time for ClickHouse to acknowledge one insert",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    rowsInserted: new Counter({
      name: "headroom_worker_rows_inserted_total",
      help: "Report rows acknowledged by ClickHouse (rate() gives rows/s)",
      registers: [registry],
    }),
    failures: new Counter({
      name: "headroom_worker_insert_failures_total",
      help: "Failed inserts by kind (transient: retried; data: split and isolated)",
      labelNames: ["kind"] as const,
      registers: [registry],
    }),
    deadLettered: new Counter({
      name: "headroom_worker_dead_lettered_rows_total",
      help: "Rows ClickHouse refused, moved to the dead-letter set",
      registers: [registry],
    }),
    redeliveredJobs: new Counter({
      name: "headroom_worker_redelivered_jobs_total",
      help: "Jobs taken again after their worker stalled past its lock or died",
      registers: [registry],
    }),
    manifestsReinserted: new Counter({
      name: "headroom_worker_manifests_reinserted_total",
      help: "Batches inserted again, byte for byte, for a redelivered job (ClickHouse drops the repeat)",
      registers: [registry],
    }),
    replayedRows: new Counter({
      name: "headroom_worker_replayed_rows_total",
      help: "Rows of jobs put back by dlq replay: stored now, or found already stored and skipped",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    failedJobs: new Gauge({
      name: "headroom_worker_failed_jobs",
      help: "Jobs in the dead-letter (failed) set of the shard, at the last sweep",
      registers: [registry],
    }),
    failedJobsExpired: new Counter({
      name: "headroom_worker_failed_jobs_expired_total",
      help: "Failed jobs removed after DLQ_RETENTION_DAYS, with their manifests",
      registers: [registry],
    }),
    manifestJobs: new Gauge({
      name: "headroom_worker_manifest_jobs",
      help: "Jobs that still hold a batch manifest in Redis, at the last sweep",
      registers: [registry],
    }),
    awaitingReplicas: new Gauge({
      name: "headroom_worker_batches_awaiting_replicas",
      help: "Batches held from ClickHouse because their manifest is on fewer replicas than REDIS_ACK_REPLICAS",
      registers: [registry],
    }),
    jobsLost: new Counter({
      name: "headroom_worker_jobs_lost_to_another_worker_total",
      help: "Jobs this worker let go because another worker holds them now (after a stall)",
      registers: [registry],
    }),
    stalls: new Counter({
      name: "headroom_worker_stalled_jobs_total",
      help: "Jobs this worker's stall check found without a live lock and put back in the queue",
      registers: [registry],
    }),
    alertsShedBatches: new Counter({
      name: "headroom_worker_alerts_shed_batches_total",
      help: "Stored batches whose alert rows were not queued: the alerts queue was at ALERTS_QUEUE_MAX_JOBS",
      registers: [registry],
    }),
    alertsShedRows: new Counter({
      name: "headroom_worker_alerts_shed_rows_total",
      help: "Watched rows never evaluated for alerts because the alerts queue was full",
      registers: [registry],
    }),
    lagSeconds: new Gauge({
      name: "headroom_worker_queue_lag_seconds",
      help: "How far behind this worker is: the age of the oldest job it holds or that waits, else of the oldest report of its last insert",
      registers: [registry],
      // Read at scrape: when inserts stop while work is pending, the lag keeps growing.
      async collect() {
        const now = Date.now();
        let oldest: number | null = null;
        for (const w of watched) {
          const held = w.activity(now).oldestHeldAt;
          const waiting = await w.oldestWaitingAt().catch(() => null);
          for (const at of [held, waiting]) if (at !== null) oldest = Math.min(oldest ?? at, at);
        }
        this.set(oldest === null ? lastLagS : Math.max(lastLagS, (now - oldest) / 1000));
      },
    }),
  };
}
