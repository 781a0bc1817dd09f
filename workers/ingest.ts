import { createClickHouse } from "../src/clickhouse/client.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/lib/logger.js";
import { onShutdown } from "../src/lib/shutdown.js";
import { createWorkerRedis } from "../src/redis/connections.js";
import { createIngestWorker } from "../src/worker/create-ingest-worker.js";
import { createWorkerMetrics, serveWorkerMetrics } from "../src/worker/metrics.js";

// Ingest worker process: read config, build clients, migrate, start, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "worker");
const clickhouse = createClickHouse(config);
if (config.MIGRATE_ON_START) {
  await migrate(
    clickhouse,
    { db: config.CLICKHOUSE_DATABASE, retentionDays: config.RETENTION_DAYS },
    (msg) => logger.info(msg),
  );
}
const redis = createWorkerRedis(config.REDIS_URL);
redis.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));
const metrics = createWorkerMetrics();
const { server, port } = await serveWorkerMetrics(
  metrics,
  config.WORKER_METRICS_HOST,
  config.WORKER_METRICS_PORT,
);
const ingest = createIngestWorker({ config, redis, clickhouse, logger, metrics });
onShutdown(logger, async () => {
  await ingest.close();
  server.close();
  await clickhouse.close();
  await redis.quit().catch(() => redis.disconnect());
});
ingest.start();
logger.info({ metricsPort: port, concurrency: config.WORKER_CONCURRENCY }, "worker ready");
