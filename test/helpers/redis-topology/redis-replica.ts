import {
  type RedisServer,
  type RedisServerOptions,
  startRedisServer,
} from "../../../src/local/redis-server.js";
import { pollUntil } from "./poll-until.js";
import { assertReplicaLinked, info, withRedis } from "./redis-probe.js";

// One local replica of a primary, for measuring what a replicated acknowledgement (WAIT 1)
// costs: a redis-server started as a replica, returned once it holds the primary's data and
// follows its writes, and has written its first AOF: until then Redis refuses to shut down
// ("Writing initial AOF, can't exit"), and a SIGTERM sent meanwhile is lost.

export async function startRedisReplica(
  primaryUrl: string,
  opts: Omit<RedisServerOptions, "replicaOf"> & { timeoutMs?: number },
): Promise<RedisServer> {
  const { timeoutMs = 30_000, ...serverOpts } = opts;
  const replica = await startRedisServer({ ...serverOpts, replicaOf: primaryUrl });
  try {
    await pollUntil(
      `replica ${replica.port} linked to its primary`,
      async () => {
        await assertReplicaLinked(replica.url);
        const persistence = await withRedis(replica.url, (r) => info(r, "persistence"));
        const writing =
          persistence.get("aof_rewrite_in_progress") !== "0" ||
          persistence.get("aof_rewrite_scheduled") !== "0";
        return writing ? undefined : true;
      },
      { timeoutMs },
    );
  } catch (err) {
    await replica.kill();
    throw err;
  }
  return replica;
}
