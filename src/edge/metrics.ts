import { Counter, Gauge, Histogram, Registry } from "prom-client";

// Prometheus metrics of one edge process, on a registry of its own (no global state).

export function createEdgeMetrics() {
  const registry = new Registry();
  return {
    registry,
    requests: new Counter({
      name: "headroom_http_requests_total",
      help: "HTTP requests by route and status",
      labelNames: ["route", "status"] as const,
      registers: [registry],
    }),
    enqueueSeconds: new Histogram({
      name: "headroom_enqueue_seconds",
      help: "Time for Redis to acknowledge one addBulk",
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    reportsPerJob: new Histogram({
      name: "headroom_reports_per_job",
      help: "Reports grouped into one queue job",
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
      registers: [registry],
    }),
    reportWarnings: new Counter({
      name: "headroom_report_warnings_total",
      help: "Unusable optional values stored as null or cut, by field path",
      labelNames: ["path"] as const,
      registers: [registry],
    }),
    enqueueFailures: new Counter({
      name: "headroom_enqueue_failures_total",
      help: "addBulk calls that Redis did not acknowledge",
      registers: [registry],
    }),
    primariesShortOfReplicas: new Gauge({
      name: "headroom_redis_primaries_short_of_replicas",
      help: "Redis primaries with fewer replicas than REDIS_ACK_REPLICAS: their batches wait, held from ClickHouse",
      registers: [registry],
    }),
    backlogJobs: new Gauge({
      name: "headroom_backlog_jobs",
      help: "Jobs waiting in the reports queue (last poll)",
      registers: [registry],
    }),
  };
}

export type EdgeMetrics = ReturnType<typeof createEdgeMetrics>;
