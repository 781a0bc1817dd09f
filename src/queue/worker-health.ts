import { Gauge, type Registry } from "prom-client";
import type { WorkerActivity } from "./worker-runtime.js";

// What tells an operator that a worker holds work and gets nowhere (ClickHouse down while jobs
// wait, a lost connection): gauges over the workers a process runs, and a health check that
// fails once jobs have been held for `stuckAfterMs` without one finishing.

export interface WatchedWorker {
  /** The queue, as a label. */
  queue: string;
  activity(now?: number): WorkerActivity;
  oldestWaitingAt(): Promise<number | null>;
}

export interface WorkerHealth {
  ok: boolean;
  reason?: string;
}

export function workerHealth(workers: WatchedWorker[], stuckAfterMs: number): WorkerHealth {
  for (const w of workers) {
    const a = w.activity();
    if (a.stuckMs > stuckAfterMs) {
      return {
        ok: false,
        reason: `${w.queue}: ${a.held} jobs held and none finished for ${Math.round(a.stuckMs / 1000)} s`,
      };
    }
  }
  return { ok: true };
}

/** Per-queue gauges of held jobs, stuck time and the oldest waiting job's age, read at scrape. */
export function registerWorkerGauges(
  registry: Registry,
  prefix: string,
  workers: () => WatchedWorker[],
) {
  new Gauge({
    name: `${prefix}_jobs_held`,
    help: "Jobs this process holds now",
    labelNames: ["queue"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) this.set({ queue: w.queue }, w.activity().held);
    },
  });
  new Gauge({
    name: `${prefix}_stuck_seconds`,
    help: "Time with jobs in hand and none finished (0 when none is held); /healthz fails past WORKER_HEALTH_STALL_MS",
    labelNames: ["queue"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const w of workers()) this.set({ queue: w.queue }, w.activity().stuckMs / 1000);
    },
  });
  new Gauge({
    name: `${prefix}_oldest_waiting_job_seconds`,
    help: "Age of the job that has waited longest in the queue (0 when none waits)",
    labelNames: ["queue"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const now = Date.now();
      await Promise.all(
        workers().map(async (w) => {
          const at = await w.oldestWaitingAt().catch(() => null);
          this.set({ queue: w.queue }, at === null ? 0 : Math.max(0, (now - at) / 1000));
        }),
      );
    },
  });
}
