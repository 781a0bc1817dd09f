import { DelayedError, type Job, Worker } from "bullmq";
import type { Logger } from "pino";
import { ShutdownAbort } from "../lib/retry.js";
import type { RedisClient } from "../redis/connections.js";
import type { QueueNames } from "./reports-queue.js";
import { createStallWatchdog } from "./stall-watchdog.js";
import { createWaitingProbe } from "./waiting-probe.js";

// What every BullMQ worker of Headroom runs on (ingest, alert evaluation, webhook delivery):
// a job cut short by our own shutdown goes back to the queue without using up an attempt; a
// stalled job is taken again as often as it takes; errors are logged, not printed raw; and a
// watchdog reconnects a worker whose connection went silently dead while jobs wait.

/** BullMQ moves a job to the failed set once it stalled more often than this: never, in practice. */
const UNLIMITED_STALLS = Number.MAX_SAFE_INTEGER;

export interface WorkerRuntimeOptions<Data> {
  names: QueueNames;
  /** A worker-role connection (maxRetriesPerRequest: null). */
  redis: RedisClient;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  logger: Logger;
  /** Throws ShutdownAbort when the shutdown cut the job short. */
  process: (job: Job<Data>, lockToken: string) => Promise<void>;
}

export function createWorkerRuntime<Data>(opts: WorkerRuntimeOptions<Data>) {
  const { logger, names } = opts;
  // For the stall watchdog: jobs started or finished so far, and jobs in hand now.
  let progress = 0;
  let held = 0;
  let closing = false;

  const worker = new Worker<Data, void, string>(
    names.name,
    async (job: Job<Data>, token?: string) => {
      progress += 1;
      held += 1;
      try {
        await opts.process(job, token ?? "");
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
      connection: opts.redis,
      prefix: names.prefix,
      concurrency: opts.concurrency,
      autorun: false,
      lockDuration: opts.lockDurationMs,
      stalledInterval: opts.stalledIntervalMs,
      // A stalled job (its worker froze or died) is redelivered as often as it takes: every
      // processor here makes a repeat harmless, and the failed set keeps only real failures.
      maxStalledCount: UNLIMITED_STALLS,
    },
  );
  // Without a listener BullMQ prints connection errors as raw stack traces on stderr.
  worker.on("error", (err) => logger.warn({ err: err.message, queue: names.name }, "worker error"));

  const run = () => {
    void worker
      .run()
      .catch((err: unknown) => logger.error({ err }, "worker stopped with an error"));
  };

  const probe = createWaitingProbe(opts.redis, names);
  const stallMs = Math.max(opts.lockDurationMs, opts.stalledIntervalMs);
  const watchdog = createStallWatchdog({
    stallMs,
    intervalMs: Math.max(250, Math.floor(stallMs / 4)),
    progress: () => progress,
    hasRoom: () => held < opts.concurrency,
    waiting: () => probe.waiting(),
    recover: async ({ waiting, idleMs }) => {
      if (closing) return;
      logger.warn(
        { waiting, idleMs, queue: names.name },
        "worker stalled: jobs are waiting but none was taken; reconnecting to Redis",
      );
      // Drops the worker's connection (destroyed if it does not close within ioredis's
      // disconnectTimeout) and connects again; commands still unanswered are sent again.
      opts.redis.disconnect(true);
      if (!worker.isRunning()) run();
    },
  });

  return {
    worker,
    watchdog,
    start() {
      run();
      watchdog.start();
    },
    /**
     * Stops taking jobs; `whileClosing` runs as the worker waits for the jobs in hand (it may
     * flush them or cut them short); then everything is closed.
     */
    async close(whileClosing?: () => Promise<void>) {
      closing = true;
      await watchdog.stop();
      const workerClosed = worker.close();
      try {
        await whileClosing?.();
      } finally {
        await workerClosed;
        await probe.close();
      }
    },
  };
}

export type WorkerRuntime = ReturnType<typeof createWorkerRuntime>;
