import { DelayedError, type Job, Worker } from "bullmq";
import type { Logger } from "pino";
import { closeSteps } from "../lib/close-steps.js";
import { ShutdownAbort } from "../lib/retry.js";
import type { RedisClient } from "../redis/connections.js";
import type { QueueNames } from "./reports-queue.js";
import { createStallWatchdog, type StallWatchdog } from "./stall-watchdog.js";
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
  /** Jobs held at first, until `limit` says otherwise (concurrency if unset). */
  initialJobs?: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  logger: Logger;
  /** Throws ShutdownAbort when the shutdown cut the job short. */
  process: (job: Job<Data>, lockToken: string) => Promise<void>;
}

export interface WorkerActivity {
  held: number;
  /** When the oldest job in hand was queued (ms), or null when none is held. */
  oldestHeldAt: number | null;
  /** Time with jobs in hand and none finished: grows while work is stuck (e.g. ClickHouse down). */
  stuckMs: number;
}

export interface WorkerRuntime<Data> {
  worker: Worker<Data, void>;
  watchdog: StallWatchdog;
  /** Jobs waiting in this worker's queue (over the watchdog's connection). */
  waiting: () => Promise<number>;
  oldestWaitingAt: () => Promise<number | null>;
  /** What this worker holds now, and for how long it has held work without finishing a job. */
  activity(now?: number): WorkerActivity;
  start(): void;
  /**
   * Jobs held at once from now on, between 1 and its concurrency (a bound on rows in hand); the
   * stall watchdog counts a worker at this as busy.
   */
  limit(jobs: number): void;
  /**
   * Stops taking jobs; `whileClosing` runs as the worker waits for the jobs in hand (it may
   * flush them or cut them short); then everything is closed.
   */
  close(whileClosing?: () => Promise<void>): Promise<void>;
}

/** What BullMQ's Worker keeps of its main loop: a queue that wakes the loop when given a settled promise. */
interface MainLoop {
  mainLoopQueue?: { add(promise: Promise<unknown>): void };
}

export function createWorkerRuntime<Data>(opts: WorkerRuntimeOptions<Data>): WorkerRuntime<Data> {
  const { logger, names } = opts;
  // For the stall watchdog: jobs started or finished so far, and jobs in hand now.
  let progress = 0;
  let held = 0;
  let closing = false;
  // For health and lag: when each job in hand was queued, and when this worker last got anywhere.
  const heldSince = new Map<Job<Data>, number>();
  let busySince = 0;
  let lastFinishAt = 0;

  const worker = new Worker<Data, void, string>(
    names.name,
    async (job: Job<Data>, token?: string) => {
      progress += 1;
      held += 1;
      if (held === 1) busySince = Date.now();
      heldSince.set(job, job.timestamp);
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
        heldSince.delete(job);
        lastFinishAt = Date.now();
      }
    },
    {
      connection: opts.redis,
      prefix: names.prefix,
      concurrency: Math.max(1, Math.min(opts.concurrency, opts.initialJobs ?? opts.concurrency)),
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
    hasRoom: () => held < worker.concurrency,
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
    waiting: () => probe.waiting(),
    oldestWaitingAt: () => probe.oldestWaitingAt(),
    activity(now = Date.now()): WorkerActivity {
      let oldestHeldAt: number | null = null;
      for (const at of heldSince.values()) oldestHeldAt = Math.min(oldestHeldAt ?? at, at);
      return {
        held,
        oldestHeldAt,
        stuckMs: held > 0 ? now - Math.max(busySince, lastFinishAt) : 0,
      };
    },
    start() {
      run();
      watchdog.start();
    },
    limit(jobs) {
      const next = Math.max(1, Math.min(opts.concurrency, jobs));
      const rose = next > worker.concurrency;
      worker.concurrency = next;
      // BullMQ's main loop looks at its concurrency again only when something in hand settles;
      // a raise wakes it, as BullMQ's own resume() does (bullmq 6.7's mainLoopQueue).
      if (rose) (worker as unknown as MainLoop).mainLoopQueue?.add(Promise.resolve());
    },
    async close(whileClosing?: () => Promise<void>) {
      closing = true;
      const log = logger.child({ queue: names.name });
      await closeSteps(log, [["stall watchdog", () => watchdog.stop()]]);
      const workerClosed = worker.close();
      try {
        await closeSteps(log, [["jobs in hand", () => whileClosing?.()]]);
      } finally {
        await closeSteps(log, [
          // Past the jobs in hand, only acknowledgements and BullMQ's own connections are left;
          // a job not acknowledged is delivered again once its lock expires.
          ["bullmq worker", () => workerClosed, 3_000],
          ["waiting probe", () => probe.close(), 2_000],
        ]);
      }
    },
  };
}
