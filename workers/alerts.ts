import { createAlertsWorker } from "../src/alerts/create-alerts-worker.js";
import { createClickHouse } from "../src/clickhouse/client.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/lib/logger.js";
import { onShutdown } from "../src/lib/shutdown.js";
import { createWorkerRedis } from "../src/redis/connections.js";

// Alerts worker process: evaluates stored batches against alert rules, stores alert events,
// delivers signed webhooks. Read config, build clients, migrate, start, handle signals.

const config = loadConfig();
const logger = createLogger(config.LOG_LEVEL, "alerts");
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
const alerts = createAlertsWorker({ config, redis, clickhouse, logger });
onShutdown(logger, async () => {
  await alerts.close();
  await clickhouse.close();
  await redis.quit().catch(() => redis.disconnect());
});
alerts.start();
logger.info(
  { concurrency: config.ALERTS_CONCURRENCY, webhooks: config.ALERTS_WEBHOOK_CONCURRENCY },
  "alerts worker ready",
);
