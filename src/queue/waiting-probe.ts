import { Queue } from "bullmq";
import { duplicateWith, isCommandTimeout, type RedisClient } from "../redis/connections.js";
import type { QueueNames } from "./reports-queue.js";

/**
 * A stall watchdog's own view of a queue: a connection whose commands time out (and which is
 * replaced when one does), so it cannot hang the way a worker's connection can.
 */
export function createWaitingProbe(redis: RedisClient, names: QueueNames) {
  const probeRedis = duplicateWith(redis, {
    commandTimeout: 2_000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
  });
  probeRedis.on("error", () => {});
  const probe = new Queue(names.name, { connection: probeRedis, prefix: names.prefix });
  probe.on("error", () => {});
  return {
    /** Jobs waiting for any worker. */
    async waiting(): Promise<number> {
      try {
        return await probe.getWaitingCount();
      } catch (err) {
        // Unanswered: the probe's own connection may be the dead kind. A new one.
        if (isCommandTimeout(err)) probeRedis.disconnect(true);
        throw err;
      }
    },
    async close(): Promise<void> {
      await probe.close();
      probeRedis.disconnect();
    },
  };
}

export type WaitingProbe = ReturnType<typeof createWaitingProbe>;
