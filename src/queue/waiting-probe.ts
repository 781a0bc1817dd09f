import { Queue } from "bullmq";
import { duplicateWith, isCommandTimeout, type RedisClient } from "../redis/connections.js";
import type { QueueNames } from "./reports-queue.js";

export interface WaitingProbe {
  /** Jobs waiting for any worker. */
  waiting: () => Promise<number>;
  /** When the job that has waited longest was queued (ms), or null when none waits. */
  oldestWaitingAt: () => Promise<number | null>;
  close(): Promise<void>;
}

/**
 * A stall watchdog's own view of a queue: a connection whose commands time out (and which is
 * replaced when one does), so it cannot hang the way a worker's connection can.
 */
export function createWaitingProbe(redis: RedisClient, names: QueueNames): WaitingProbe {
  const probeRedis = duplicateWith(redis, {
    commandTimeout: 2_000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
  });
  probeRedis.on("error", () => {});
  const probe = new Queue(names.name, { connection: probeRedis, prefix: names.prefix });
  probe.on("error", () => {});
  async function renewing<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      // Unanswered: the probe's own connection may be the dead kind. A new one.
      if (isCommandTimeout(err)) probeRedis.disconnect(true);
      throw err;
    }
  }
  return {
    waiting: () => renewing(() => probe.getWaitingCount()),
    oldestWaitingAt: () =>
      renewing(async () => {
        const [oldest] = await probe.getJobs(["wait"], 0, 0, true);
        return oldest ? oldest.timestamp : null;
      }),
    async close(): Promise<void> {
      await probe.close();
      probeRedis.disconnect();
    },
  };
}
