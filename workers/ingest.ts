import { runWorkerProcess } from "../src/main/worker-process.js";
import { createWorkerMetrics } from "../src/worker/metrics.js";
import { createShardedIngest } from "../src/worker/sharded-ingest.js";

// Ingest worker process: reports from the queue into ClickHouse (src/main/worker-process.ts boots it).

await runWorkerProcess({
  name: "worker",
  readyAs: "worker",
  metricsPort: (config) => config.WORKER_METRICS_PORT,
  build({ config, logger, redis, clickhouse }) {
    const metrics = createWorkerMetrics();
    const ingest = createShardedIngest({ config, redis, clickhouse, logger, metrics });
    return {
      metrics,
      start: () => ingest.start(),
      close: () => ingest.close(),
      facts: { concurrency: config.WORKER_CONCURRENCY, shards: ingest.shards() },
    };
  },
});
