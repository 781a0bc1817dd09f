import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { WARNING_KINDS } from "../report/warning-kind.js";

// Prometheus metrics of one edge process, on a registry of its own (no global state), with the
// process's own (event-loop lag, heap, CPU).

export interface EdgeMetrics {
  registry: Registry;
  requests: Counter<"status" | "route">;
  enqueueSeconds: Histogram<string>;
  reportsPerJob: Histogram<string>;
  reportWarnings: Counter<"kind">;
  enqueueFailures: Counter<string>;
  primariesShortOfReplicas: Gauge<string>;
  unavailable: Counter<"reason">;
  redisMemoryRatio: Gauge<string>;
  backlogMaxJobs: Gauge<string>;
  backlogJobs: Gauge<string>;
  bytesInFlight: Gauge<string>;
  /** Where the bytes-in-flight gauge reads its value at each scrape. */
  readBytesInFlight(read: () => number): void;
  bytesAtWork: Gauge<string>;
  requestsAwaitingTurn: Gauge<string>;
  /** Where the turns' gauges read their values at each scrape (edge/work-turns.ts). */
  readTurns(turns: { readonly bytes: number; readonly waiting: number }): void;
  otlpSpans: Counter<"outcome">;
}

/** What became of a span sent to POST /v1/traces: a closed set, never a tenant's string. */
export type OtlpSpanOutcome = "stored" | "duplicate" | "merged" | "ignored" | "rejected" | "retry";

export function createEdgeMetrics(): EdgeMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let bytesInFlight = () => 0;
  let turns = { bytes: 0, waiting: 0 };
  const metrics: EdgeMetrics = {
    registry,
    requests: new Counter({
      name: "headroom_http_requests_total",
      help: "HTTP requests by route and status",
      labelNames: ["route", "status"] as const,
      registers: [registry],
    }),
    enqueueSeconds: new Histogram({
      name: "headroom_enqueue_seconds",
      help: "Time for Redis to acknowledge one job (an addBulk)",
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
      help: `Unusable optional values stored as null or cut (or windows dropped), by kind: the report field named (${WARNING_KINDS.join(", ")})`,
      labelNames: ["kind"] as const,
      registers: [registry],
    }),
    enqueueFailures: new Counter({
      name: "headroom_enqueue_failures_total",
      help: "Job writes that Redis did not acknowledge",
      registers: [registry],
    }),
    primariesShortOfReplicas: new Gauge({
      name: "headroom_redis_primaries_short_of_replicas",
      help: "Redis primaries with fewer replicas than REDIS_ACK_REPLICAS: their batches wait, held from ClickHouse",
      registers: [registry],
    }),
    unavailable: new Counter({
      name: "headroom_unavailable_total",
      help: "503 answers by reason (redis, backlog, redis_memory, enqueue, key_store, in_flight, shutting_down)",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
    redisMemoryRatio: new Gauge({
      name: "headroom_redis_memory_ratio",
      help: "Redis used_memory / maxmemory of the fullest primary (last poll; absent without maxmemory)",
      registers: [registry],
    }),
    backlogMaxJobs: new Gauge({
      name: "headroom_backlog_max_jobs",
      help: "BACKLOG_MAX_JOBS: above it the edge answers 503",
      registers: [registry],
    }),
    backlogJobs: new Gauge({
      name: "headroom_backlog_jobs",
      help: "Jobs waiting in the reports queue (last poll)",
      registers: [registry],
    }),
    bytesInFlight: new Gauge({
      name: "headroom_edge_bytes_in_flight",
      help: "Request bodies the edge holds now, every project's, by declared size (a project past EDGE_MAX_BYTES_IN_FLIGHT gets 503)",
      registers: [registry],
      collect() {
        this.set(bytesInFlight());
      },
    }),
    readBytesInFlight(read) {
      bytesInFlight = read;
    },
    bytesAtWork: new Gauge({
      name: "headroom_edge_bytes_at_work",
      help: "Bodies of batches and OTLP exports the edge works on now, parse to answer (at most EDGE_MAX_BYTES_AT_WORK, or one larger body alone)",
      registers: [registry],
      collect() {
        this.set(turns.bytes);
      },
    }),
    requestsAwaitingTurn: new Gauge({
      name: "headroom_edge_requests_awaiting_turn",
      help: "Batches and OTLP exports read and waiting for their turn at work (EDGE_MAX_BYTES_AT_WORK)",
      registers: [registry],
      collect() {
        this.set(turns.waiting);
      },
    }),
    readTurns(read) {
      turns = read;
    },
    otlpSpans: new Counter({
      name: "headroom_otlp_spans_total",
      help: "Spans sent to POST /v1/traces by outcome: stored, duplicate (sent before), merged (a GenAI span reported by its HTTP span), ignored (no provider call), rejected, retry (answered 429/503)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
  };
  // Every label a tenant's report can reach comes from a closed set: each kind is there from the start.
  for (const kind of WARNING_KINDS) metrics.reportWarnings.labels({ kind }).inc(0);
  return metrics;
}
