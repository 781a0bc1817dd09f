import { join } from "node:path";
import { Redis } from "ioredis";
import { type RedisServer, startRedisServer } from "../src/local/redis-server.js";
import type { Cleanup } from "./cleanup.js";
import { pollUntil } from "./poll.js";

// `--ack-replicas N`: local replicas of the benchmark's Redis, so that REDIS_ACK_REPLICAS has
// replicas to wait for, as a deployment's would (on the same machine here: the cost measured is
// the replication work and the WAIT round trip, not a network's latency).

/**
 * Replicas of the benchmark's Redis, each a redis-server of its own made a replica with
 * REPLICAOF; resolves once the primary counts every one as connected and in sync.
 */
export async function startReplicas(
  primary: RedisServer,
  admin: Redis,
  count: number,
  dir: string,
  cleanup: Cleanup,
): Promise<RedisServer[]> {
  const replicas: RedisServer[] = [];
  for (let i = 0; i < count; i++) {
    const replica = await startRedisServer({ dir: join(dir, `redis-replica-${i + 1}`) });
    cleanup.add(`stop redis replica ${i + 1}`, () => replica.stop());
    const client = new Redis(replica.url, { maxRetriesPerRequest: 1 });
    try {
      await client.call("REPLICAOF", "127.0.0.1", String(primary.port));
    } finally {
      client.disconnect();
    }
    replicas.push(replica);
  }
  if (count > 0) {
    const synced = await pollUntil(
      async () => {
        const info = await admin.info("replication");
        const online = info.match(/^slave\d+:.*state=online/gm) ?? [];
        return online.length >= count;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    if (!synced) throw new Error(`the ${count} Redis replica(s) did not come online in 30 s`);
  }
  return replicas;
}
