import { Cluster } from "ioredis";
import type { RedisClient } from "./connections.js";

// Redis WAIT, for REDIS_ACK_REPLICAS. WAIT counts the writes of its own connection, so it must
// follow the write it confirms on the same one. On a Cluster it travels in a pipeline whose key is
// in the written key's slot: the pipeline goes to the slot's primary over the Cluster's one
// connection to it (a bare `cluster.wait()` goes to any node, and answers at once).

/** Replicas that hold every write this connection made so far (at most `replicas`). */
export async function waitForReplicas(
  redis: RedisClient,
  slotKey: string,
  replicas: number,
  timeoutMs: number,
): Promise<number> {
  if (!(redis instanceof Cluster)) return redis.wait(replicas, timeoutMs);
  const results = await redis.pipeline().exists(slotKey).wait(replicas, timeoutMs).exec();
  const [err, acked] = results?.[1] ?? [new Error("no reply to WAIT")];
  if (err) throw err;
  return acked as number;
}
