import type { Config } from "../config.js";
import { answered } from "../lib/answered.js";
import type { RedisClient } from "../redis/connections.js";
import { createJobWriter, type WriteJob } from "./job-writer.js";
import { createReportsQueue, type QueueNames, type ReportsQueue } from "./reports-queue.js";
import { registerShards, shardNames } from "./shards.js";

// The edge's side of the queue: one BullMQ queue per shard on the edge's queue connection, the
// durable job writer over them, and their backlog as one figure.

type JobState = Parameters<ReportsQueue["getJobCounts"]>[number];

export interface EdgeQueues {
  names: QueueNames[];
  queues: ReportsQueue[];
  write: WriteJob;
  /**
   * Jobs in these states, over every shard that answers: a shard failing over does not stop
   * the others (its writes fail on their own, and the enqueuer avoids it meanwhile).
   */
  getJobCounts(...states: JobState[]): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export async function createEdgeQueues(
  redis: RedisClient,
  config: Pick<
    Config,
    "QUEUE_PREFIX" | "QUEUE_NAME" | "QUEUE_SHARDS" | "REDIS_ACK_REPLICAS" | "REDIS_ACK_TIMEOUT_MS"
  >,
  onError: (err: Error) => void,
): Promise<EdgeQueues> {
  const base = { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME };
  const names: QueueNames[] = shardNames(base, config.QUEUE_SHARDS);
  // Recorded before the first job, so that workers know every shard that may hold one.
  await registerShards(redis, base, names);
  const queues = names.map((n) => {
    const queue = createReportsQueue(redis, n);
    queue.on("error", onError);
    return queue;
  });
  const write: WriteJob = createJobWriter({
    queues,
    names,
    redis,
    ackReplicas: config.REDIS_ACK_REPLICAS,
    ackTimeoutMs: config.REDIS_ACK_TIMEOUT_MS,
  });
  return {
    names,
    queues,
    write,
    async getJobCounts(...states: JobState[]): Promise<Record<string, number>> {
      const all = await answered(queues.map((q) => q.getJobCounts(...states)));
      const sum: Record<string, number> = {};
      for (const counts of all) {
        for (const [state, n] of Object.entries(counts)) sum[state] = (sum[state] ?? 0) + n;
      }
      return sum;
    },
    async close() {
      await Promise.all(queues.map((q) => q.close()));
    },
  };
}
