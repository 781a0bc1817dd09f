import { createServer, type Server } from "node:http";
import { Counter, Gauge, Histogram, Registry } from "prom-client";

// Prometheus metrics of one worker process, served on a port of its own.

export function createWorkerMetrics() {
  const registry = new Registry();
  return {
    registry,
    batchRows: new Histogram({
      name: "headroom_worker_batch_rows",
      help: "Rows per ClickHouse insert batch",
      buckets: [1, 10, 100, 1_000, 5_000, 10_000, 20_000, 50_000, 100_000],
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
    lagSeconds: new Gauge({
      name: "headroom_worker_queue_lag_seconds",
      help: "Age of the oldest report in the last batch when it was inserted",
      registers: [registry],
    }),
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

/** Serves /metrics and /healthz; port 0 picks a free port. */
export async function serveWorkerMetrics(
  metrics: Pick<WorkerMetrics, "registry">,
  host: string,
  port: number,
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.url === "/metrics") {
      metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": metrics.registry.contentType });
          res.end(text);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
    } else if (req.url === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"status":"ok"}');
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return { server, port: typeof address === "object" && address ? address.port : port };
}
