import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/lib/logger.js";
import { onShutdown } from "../src/lib/shutdown.js";
import { createIngestWorker } from "../src/worker/create-ingest-worker.js";
import { createWorkerMetrics, serveWorkerMetrics } from "../src/worker/metrics.js";
import { createWorkerClients } from "../src/worker/worker-clients.js";

// Ingest worker process: read config, build clients, migrate, start, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "worker");
const { clickhouse, redis } = await createWorkerClients(config, logger);
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
