import { type Config, isSet } from "../config.js";
import { readStackFile } from "../local/stack-file.js";
import { createCliRedis, type RedisClient, waitForReady } from "../redis/connections.js";
import { describeTopology, redisTopology } from "../redis/topology.js";
import { CliError, UsageError } from "./errors.js";

// A command's Redis connection. A worker's connection waits for Redis as long as it takes; a
// person at a terminal is told within seconds that Redis cannot be reached, and where it was
// looked for, and a command cut off half way fails instead of hanging.

const READY_TIMEOUT_MS = 5_000;

export async function connectRedis(
  config: Config,
  env: Record<string, string | undefined> = process.env,
): Promise<RedisClient> {
  // Redis's default address is not a choice: a command run away from its stack (another
  // HEADROOM_DATA_DIR, a stack never started) must not create keys in whatever Redis listens there.
  const named = (["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"] as const).some((k) =>
    isSet(env, k),
  );
  if (!named && !readStackFile(config.HEADROOM_DATA_DIR)) {
    throw new UsageError(
      `no local stack in ${config.HEADROOM_DATA_DIR} (no stack.json) and no Redis named: start it ` +
        "with `npm start` (the same HEADROOM_DATA_DIR), or set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS",
    );
  }
  const topology = redisTopology(config);
  const redis = createCliRedis(topology);
  let lastError: Error | undefined;
  // Reconnection attempts report here, not as ioredis's "Unhandled error event" noise.
  redis.on("error", (err: Error) => {
    lastError = err;
  });
  try {
    await waitForReady(redis, READY_TIMEOUT_MS);
  } catch {
    redis.disconnect();
    const why = lastError ? `: ${lastError.message}` : "";
    throw new CliError(
      `cannot reach Redis at ${describeTopology(topology)}${why}\n` +
        "(start the local stack with `npm start`, or set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)",
    );
  }
  return redis;
}

export { closeRedis } from "../redis/connections.js";
