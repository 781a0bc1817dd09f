import { createAlertsWorker } from "../src/alerts/create-alerts-worker.js";
import { createAlertsMetrics } from "../src/alerts/metrics.js";
import { createDeclarationsReader } from "../src/control/declarations-cache.js";
import { runWorkerProcess } from "../src/main/worker-process.js";

// Alerts worker process: evaluates stored batches against alert rules, stores alert events,
// delivers signed webhooks (src/main/worker-process.ts boots it).

await runWorkerProcess({
  name: "alerts",
  readyAs: "alerts worker",
  metricsPort: (config) => config.ALERTS_METRICS_PORT,
  build({ config, logger, redis, clickhouse }) {
    const metrics = createAlertsMetrics();
    // Declared limits (docs/providers.md), read as the read API reads them, cached here.
    const declarations = createDeclarationsReader(redis, config.QUEUE_PREFIX);
    const alerts = createAlertsWorker({ config, redis, clickhouse, logger, metrics, declarations });
    return {
      metrics,
      start: () => alerts.start(),
      close: () => alerts.close(),
      facts: {
        concurrency: config.ALERTS_CONCURRENCY,
        webhooks: config.ALERTS_WEBHOOK_CONCURRENCY,
      },
    };
  },
});
