import { createAlertsWorker } from "../src/alerts/create-alerts-worker.js";
import { createAlertsMetrics } from "../src/alerts/metrics.js";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/lib/logger.js";
import { serveMetrics } from "../src/lib/metrics-server.js";
import { onShutdown } from "../src/lib/shutdown.js";
import { workerHealth } from "../src/queue/worker-health.js";
import { createWorkerClients } from "../src/worker/worker-clients.js";

// Alerts worker process: evaluates stored batches against alert rules, stores alert events,
// delivers signed webhooks. Read config, build clients, migrate, start, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "alerts");
const { clickhouse, redis } = await createWorkerClients(config, logger);
const metrics = createAlertsMetrics();
const { server, port } = await serveMetrics(
  metrics.registry,
  config.WORKER_METRICS_HOST,
  config.ALERTS_METRICS_PORT,
  () => workerHealth(metrics.watched, config.WORKER_HEALTH_STALL_MS),
);
const alerts = createAlertsWorker({ config, redis, clickhouse, logger, metrics });
onShutdown(logger, async () => {
  await alerts.close();
  server.close();
  await clickhouse.close();
  await redis.quit().catch(() => redis.disconnect());
});
alerts.start();
logger.info(
  {
    metricsPort: port,
    concurrency: config.ALERTS_CONCURRENCY,
    webhooks: config.ALERTS_WEBHOOK_CONCURRENCY,
  },
  "alerts worker ready",
);
