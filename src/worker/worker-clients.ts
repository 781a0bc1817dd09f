import type { Logger } from "pino";
import { createClickHouse } from "../clickhouse/client.js";
import { migrate, migrationContext } from "../clickhouse/migrations.js";
import { type Config, migratesOnStart } from "../config.js";
import { createWorkerRedis } from "../redis/connections.js";
import { redisTopology } from "../redis/topology.js";

/** What every worker process starts with: ClickHouse (migrated if asked) and a worker-role Redis. */
export async function createWorkerClients(config: Config, logger: Logger) {
  const clickhouse = createClickHouse(config);
  if (migratesOnStart(config)) {
    await migrate(clickhouse, migrationContext(config), (msg) => logger.info(msg));
  }
  const redis = createWorkerRedis(redisTopology(config));
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));
  return { clickhouse, redis };
}
