import type { Worker } from "bullmq";
import type { Logger } from "pino";
import type { QueueNames } from "../queue/reports-queue.js";
import { createWaitingProbe } from "../queue/waiting-probe.js";
import type { RedisClient } from "../redis/connections.js";
import { createStallWatchdog } from "./stall-watchdog.js";

/**
 * The stall watchdog wired to a BullMQ worker: when jobs wait and the worker takes none, its
 * Redis connection is dropped and made again, and its fetch loop restarted if it stopped.
 */
export function watchForStalls(opts: {
  worker: Worker;
  redis: RedisClient;
  names: QueueNames;
  lockDurationMs: number;
  stalledIntervalMs: number;
  concurrency: number;
  logger: Logger;
  /** Jobs started or finished so far. */
  progress: () => number;
  /** Jobs in hand now. */
  held: () => number;
  closing: () => boolean;
  run: () => void;
}) {
  const probe = createWaitingProbe(opts.redis, opts.names);
  const stallMs = Math.max(opts.lockDurationMs, opts.stalledIntervalMs);
  const watchdog = createStallWatchdog({
    stallMs,
    intervalMs: Math.max(250, Math.floor(stallMs / 4)),
    progress: opts.progress,
    hasRoom: () => opts.held() < opts.concurrency,
    waiting: () => probe.waiting(),
    recover: async ({ waiting, idleMs }) => {
      if (opts.closing()) return;
      opts.logger.warn(
        { waiting, idleMs },
        "worker stalled: jobs are waiting but none was taken; reconnecting to Redis",
      );
      // Drops the worker's connection (destroyed if it does not close within ioredis's
      // disconnectTimeout) and connects again; commands still unanswered are sent again.
      opts.redis.disconnect(true);
      if (!opts.worker.isRunning()) opts.run();
    },
  });
  return {
    watchdog,
    start: () => watchdog.start(),
    async stop() {
      await watchdog.stop();
      await probe.close();
    },
  };
}
