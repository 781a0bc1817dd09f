import type { Queue } from "bullmq";
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { registerWorkerGauges, type WatchedWorker } from "../queue/worker-health.js";
import { FAILURE_STAGES } from "./evaluate-batch.js";

// Prometheus metrics of one alerts worker process: its queues' depths and failures, webhook
// outcomes, the workers' held and stuck jobs, and the process's own (event-loop lag, heap).

const STATES = ["wait", "active", "delayed", "failed"] as const;

export interface AlertsMetrics {
  registry: Registry;
  watched: WatchedWorker[];
  /** The alerts queues whose depths are exported. */
  queues: Queue[];
  queueJobs: Gauge<"queue" | "state">;
  seriesRefused: Counter<string>;
  /** Labels from a closed set: FAILURE_STAGES, never a tenant's string. */
  seriesFailures: Counter<"stage">;
  evaluationFailures: Counter<string>;
  webhooksDelivered: Counter<string>;
  webhookFailures: Counter<string>;
  webhooksDeadLettered: Counter<string>;
}

function seriesFailures(registry: Registry): Counter<"stage"> {
  const counter = new Counter({
    name: "headroom_alerts_series_failures_total",
    help: "Series whose evaluation threw (stage: samples, reading a row; evaluate, its state machine; declarations, a project's declared limits unreadable, its series evaluated without them): logged and skipped, the batch's other series evaluated",
    labelNames: ["stage"] as const,
    registers: [registry],
  });
  // Every stage from the start, so a rate() sees the first failure.
  for (const stage of FAILURE_STAGES) counter.inc({ stage }, 0);
  return counter;
}

export function createAlertsMetrics(): AlertsMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const watched: WatchedWorker[] = [];
  const queues: Queue[] = [];
  registerWorkerGauges(registry, "headroom_alerts", () => watched);
  return {
    registry,
    watched,
    queues,
    queueJobs: new Gauge({
      name: "headroom_alerts_queue_jobs",
      help: "Jobs in the alerts queues by state (failed: the alerts' dead-letter set)",
      labelNames: ["queue", "state"] as const,
      registers: [registry],
      async collect() {
        this.reset();
        await Promise.all(
          queues.map(async (q) => {
            const counts = await q.getJobCounts(...STATES).catch(() => null);
            if (!counts) return;
            for (const state of STATES) this.set({ queue: q.name, state }, counts[state] ?? 0);
          }),
        );
      },
    }),
    seriesRefused: new Counter({
      name: "headroom_alerts_series_refused_total",
      help: "Samples of new series not evaluated: their rule or project tracks as many series as allowed",
      registers: [registry],
    }),
    seriesFailures: seriesFailures(registry),
    evaluationFailures: new Counter({
      name: "headroom_alerts_evaluation_failures_total",
      help: "Alert evaluations that failed (retried with backoff, then kept in the failed set)",
      registers: [registry],
    }),
    webhooksDelivered: new Counter({
      name: "headroom_alerts_webhooks_delivered_total",
      help: "Webhooks a receiver accepted",
      registers: [registry],
    }),
    webhookFailures: new Counter({
      name: "headroom_alerts_webhook_failures_total",
      help: "Webhook attempts that failed (no answer, or an error status); retried until the last",
      registers: [registry],
    }),
    webhooksDeadLettered: new Counter({
      name: "headroom_alerts_webhooks_dead_lettered_total",
      help: "Webhooks given up after their last attempt (replay with `headroom alerts replay`)",
      registers: [registry],
    }),
  };
}
