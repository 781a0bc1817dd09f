import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/lib/logger.js";
import { serveMetrics } from "../src/lib/metrics-server.js";
import { onShutdown } from "../src/lib/shutdown.js";
import { workerHealth } from "../src/queue/worker-health.js";
import { closeRedis } from "../src/redis/connections.js";
import { createWorkerMetrics } from "../src/worker/metrics.js";
import { createShardedIngest } from "../src/worker/sharded-ingest.js";
import { createWorkerClients } from "../src/worker/worker-clients.js";

// Ingest worker process: read config, build clients, migrate, start, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "worker");
const { clickhouse, redis } = await createWorkerClients(config, logger);
const metrics = createWorkerMetrics();
const { server, port } = await serveMetrics(
  metrics.registry,
  config.WORKER_METRICS_HOST,
  config.WORKER_METRICS_PORT,
  () => workerHealth(metrics.watched, config.WORKER_HEALTH_STALL_MS),
);
const ingest = createShardedIngest({ config, redis, clickhouse, logger, metrics });
onShutdown(logger, async () => {
  await ingest.close();
  server.close();
  await clickhouse.close();
  await closeRedis(redis);
});
ingest.start();
logger.info(
  { metricsPort: port, concurrency: config.WORKER_CONCURRENCY, shards: ingest.shards() },
  "worker ready",
);
