import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Config } from "../config.js";
import { createKeyCache } from "../keys/key-cache.js";
import { createKeyStore, type KeyStore } from "../keys/key-store.js";
import { createEdgeQueues, type EdgeQueues } from "../queue/edge-queues.js";
import { createEnqueuer } from "../queue/enqueuer.js";
import { createIdJobs } from "../queue/id-jobs.js";
import type { ReportsQueue } from "../queue/reports-queue.js";
import {
  closeRedis,
  createProducerRedis,
  type RedisClient,
  waitForReady,
} from "../redis/connections.js";
import { redisTopology } from "../redis/topology.js";
import { buildApp } from "./app.js";
import { type BacklogGate, createBacklogGate } from "./backlog.js";
import { createLimits } from "./limits.js";
import { createEdgeMetrics } from "./metrics.js";
import { createReportIds } from "./report-ids.js";
import { buildMetricsApp } from "./routes/metrics.js";

// Wires one edge from configuration: clients are created here, once, and passed down.

export interface Edge {
  app: FastifyInstance;
  /** The METRICS_PORT listener's app, when METRICS_PORT is set. */
  metricsApp: FastifyInstance | null;
  redis: RedisClient;
  queues: EdgeQueues;
  /** The first shard's queue (the only one unless QUEUE_SHARDS is set). */
  queue: ReportsQueue;
  keyStore: KeyStore;
  backlog: BacklogGate;
  /**
   * Stop intake, let in-flight requests finish, flush the pending batch, give unused quota
   * back, close Redis.
   */
  close(): Promise<void>;
}

export async function createEdge(config: Config, logger: FastifyBaseLogger): Promise<Edge> {
  const topology = redisTopology(config);
  const redis = createProducerRedis(topology);
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));
  // Jobs go on a connection of their own: a WAIT for replicas blocks the connection it is sent
  // on, and must not hold up the key look-ups and limits of other requests.
  const queueRedis = createProducerRedis(topology);
  queueRedis.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));
  await Promise.all([waitForReady(redis), waitForReady(queueRedis)]);

  const queues = await createEdgeQueues(queueRedis, config, (err) =>
    logger.warn({ err: err.message }, "queue error"),
  );
  const metrics = createEdgeMetrics();
  const enqueuer = createEnqueuer({
    write: queues.write,
    shards: queues.names.length,
    maxReports: config.ENQUEUE_MAX_REPORTS,
    lingerMs: config.ENQUEUE_MAX_WAIT_MS,
    onFlush: (reports, seconds, ok) => {
      if (ok) {
        metrics.enqueueSeconds.observe(seconds);
        metrics.reportsPerJob.observe(reports);
      } else metrics.enqueueFailures.inc();
    },
  });
  const backlog = createBacklogGate({
    redis: queueRedis,
    others: [redis],
    queue: queues,
    maxJobs: config.BACKLOG_MAX_JOBS,
    maxMemoryRatio: config.REDIS_MEMORY_MAX_RATIO,
    intervalMs: config.BACKLOG_CHECK_INTERVAL_MS,
    ackReplicas: config.REDIS_ACK_REPLICAS,
    onWarning: (message) => logger.warn(message),
  });
  await backlog.start();
  const keyStore = createKeyStore(redis);
  const limits = createLimits({
    redis,
    plans: config.PLANS,
    authFailuresPerIp: config.AUTH_FAILURES_PER_IP,
    authFailureWindowS: config.AUTH_FAILURE_WINDOW_S,
    authFailureMaxClients: config.AUTH_FAILURE_MAX_CLIENTS,
    shareAuthFailures: { deployment: config.QUEUE_PREFIX },
  });
  const metricsApp =
    config.METRICS_PORT === undefined
      ? null
      : buildMetricsApp({ config, logger, backlog, metrics });
  const app = buildApp({
    config,
    logger,
    lookupKey: createKeyCache(keyStore.lookup, { ttlMs: config.KEY_CACHE_TTL_MS }),
    limits,
    backlog,
    enqueuer,
    reportIds: createReportIds(redis, "headroom", config.REPORT_ID_PENDING_MS),
    idJobs: createIdJobs({
      redis: queueRedis,
      names: queues.names,
      queues: queues.queues,
      ackReplicas: config.REDIS_ACK_REPLICAS,
      ackTimeoutMs: config.REDIS_ACK_TIMEOUT_MS,
    }),
    metrics,
  });

  return {
    app,
    metricsApp,
    redis,
    queues,
    queue: queues.queues[0] as ReportsQueue,
    keyStore,
    backlog,
    async close() {
      await app.close();
      await metricsApp?.close();
      await enqueuer.drain();
      await limits.close();
      await backlog.stop();
      await queues.close();
      await Promise.all([closeRedis(redis), closeRedis(queueRedis)]);
    },
  };
}
