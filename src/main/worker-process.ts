import type { ClickHouseClient } from "@clickhouse/client";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { createClickHouse } from "../clickhouse/client.js";
import { migrate, migrationContext } from "../clickhouse/migrations.js";
import { type Config, loadConfig, migratesOnStart } from "../config.js";
import { createLogger } from "../lib/logger.js";
import { serveMetrics } from "../lib/metrics-server.js";
import { closeSteps } from "../lib/close-steps.js";
import { onShutdown, stopWithParent } from "../lib/shutdown.js";
import { type WatchedWorker, workerHealth } from "../queue/worker-health.js";
import { closeRedis, createWorkerRedis, type RedisClient } from "../redis/connections.js";
import { redisTopology } from "../redis/topology.js";

// How every worker process (workers/ingest.ts, workers/alerts.ts) boots and stops, in one place:
// read config, build clients (migrating ClickHouse if asked), serve /metrics and /healthz, start,
// and on a signal close the worker, then the metrics server, ClickHouse and Redis.

export interface WorkerClients {
  clickhouse: ClickHouseClient;
  redis: RedisClient;
}

/** What every worker process starts with: ClickHouse (migrated if asked) and a worker-role Redis. */
export async function createWorkerClients(config: Config, logger: Logger): Promise<WorkerClients> {
  const clickhouse = createClickHouse(config);
  if (migratesOnStart(config)) {
    await migrate(clickhouse, migrationContext(config), (msg) => logger.info(msg));
  }
  const redis = createWorkerRedis(redisTopology(config));
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));
  return { clickhouse, redis };
}

export interface RunningWorker {
  metrics: { registry: Registry; watched: WatchedWorker[] };
  start(): void;
  close(): Promise<void>;
  /** Logged with the ready line. */
  facts: Record<string, unknown>;
}

export interface WorkerProcessSpec {
  /** The logger's name; the ready line is "<readyAs> ready". */
  name: string;
  readyAs: string;
  metricsPort(config: Config): number;
  build(deps: WorkerClients & { config: Config; logger: Logger }): RunningWorker;
}

export async function runWorkerProcess(spec: WorkerProcessSpec): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL, spec.name);
  stopWithParent(logger, config.STOP_WITH_PARENT_PID);
  const clients = await createWorkerClients(config, logger);
  const worker = spec.build({ ...clients, config, logger });
  const { server, port } = await serveMetrics(
    worker.metrics.registry,
    config.WORKER_METRICS_HOST,
    spec.metricsPort(config),
    () => workerHealth(worker.metrics.watched, config.WORKER_HEALTH_STALL_MS),
  );
  onShutdown(logger, () =>
    closeSteps(logger, [
      ["worker", () => worker.close()],
      ["metrics server", () => server.close()],
      ["clickhouse", () => clients.clickhouse.close()],
      ["redis", () => closeRedis(clients.redis), 2_000],
    ]),
  );
  worker.start();
  logger.info({ metricsPort: port, ...worker.facts }, `${spec.readyAs} ready`);
}
