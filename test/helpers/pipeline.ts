import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ClickHouseClient, createClient } from "@clickhouse/client";
import type { Logger } from "pino";
import { inject } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { type Config, loadConfig } from "../../src/config.js";
import { spawnEmbeddedClickHouse } from "../../src/local/clickhouse/process.js";
import {
  createReportsQueue,
  REPORT_JOB,
  type ReportsQueue,
} from "../../src/queue/reports-queue.js";
import { createWorkerRedis } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import type { ReportRow } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import {
  createIngestWorker,
  type IngestWorker,
  type IngestWorkerDeps,
} from "../../src/worker/create-ingest-worker.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";

// One test file's pipeline: its own embedded ClickHouse server process (stoppable, restartable),
// its own database and queue names on the shared test Redis.

export type Pipeline = Awaited<ReturnType<typeof startPipeline>>;

/** Job counts of a queue that has drained cleanly (see Pipeline.jobCounts). */
export const DRAINED = { wait: 0, active: 0, delayed: 0, failed: 0 } as const;

export async function startPipeline(overrides: Record<string, string> = {}) {
  const id = randomBytes(4).toString("hex");
  const dir = mkdtempSync(join(tmpdir(), "headroom-pipeline-"));
  let ch = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse") });
  /** Stopped by a test and not started again yet. */
  let stopped = false;
  const client: ClickHouseClient = createClient({ url: ch.url, request_timeout: 30_000 });
  const db = `t_${id}`;
  try {
    await migrate(client, { db, retentionDays: 30 });
  } catch (err) {
    // A failed setup must not leave the server process or its files behind.
    await client.close();
    await ch.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const env: Record<string, string> = {
    REDIS_URL: inject("redisUrl"),
    QUEUE_PREFIX: `{t-${id}}`,
    QUEUE_NAME: "reports",
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: db,
    BATCH_MAX_WAIT_MS: "100",
    WORKER_METRICS_PORT: "0",
    // Any free port: two alerts workers (this file's and another file's) must not collide on 9102.
    ALERTS_METRICS_PORT: "0",
    MIGRATE_ON_START: "false",
    LOG_LEVEL: "info",
    RETRY_MAX_DELAY_MS: "500",
    WORKER_LOCK_DURATION_MS: "2000",
    WORKER_STALLED_INTERVAL_MS: "1000",
    // Tests' webhook receivers run on loopback: allowed as an operator allows internal receivers.
    ALERTS_WEBHOOK_ALLOW: "127.0.0.1",
    ...overrides,
  };
  const config: Config = loadConfig(env);
  const redis = createWorkerRedis(redisTopology(config));
  const queue: ReportsQueue = createReportsQueue(redis, {
    prefix: config.QUEUE_PREFIX,
    name: config.QUEUE_NAME,
  });

  const scalar = async (sql: string): Promise<number> => {
    const rs = await client.query({ query: sql, format: "JSONCompactEachRow" });
    const rows = await rs.json<[string | number]>();
    return Number(rows[0]?.[0] ?? 0);
  };

  return {
    dir,
    db,
    env,
    config,
    client,
    queue,
    redis,
    get clickhouse() {
      return ch;
    },
    /** Adds `jobs` jobs of `perJob` sample rows each; returns the report ids. */
    async fill(jobs: number, perJob: number, project = "p-test"): Promise<string[]> {
      const ids: string[] = [];
      const batch = [];
      for (let j = 0; j < jobs; j++) {
        const rows: ReportRow[] = [];
        for (let r = 0; r < perJob; r++) {
          const row = sampleRow(j * perJob + r, project);
          ids.push(String(row[0]));
          rows.push(row);
        }
        batch.push({ name: REPORT_JOB, data: { v: ROW_SHAPES.current, rows } });
      }
      for (let i = 0; i < batch.length; i += 500) await queue.addBulk(batch.slice(i, i + 500));
      return ids;
    },
    scalar,
    /** Jobs waiting, active, delayed or failed: DRAINED once every job completed. */
    jobCounts: () => queue.getJobCounts("wait", "active", "delayed", "failed"),
    /** Stored rows, counting duplicates (before any merge). */
    rawCount: (project = "p-test") =>
      scalar(`SELECT count() FROM ${db}.reports WHERE project_id = '${project}'`),
    distinctCount: (project = "p-test") =>
      scalar(`SELECT uniqExact(report_id) FROM ${db}.reports WHERE project_id = '${project}'`),
    /** What analysts see in the daily rollup. */
    rollupCount: (project = "p-test") =>
      scalar(`SELECT sum(reports) FROM ${db}.reports_daily_v WHERE project_id = '${project}'`),
    async stopClickHouse(how: "stop" | "kill" = "stop") {
      stopped = true;
      await (how === "kill" ? ch.kill() : ch.stop());
    },
    /** Starts the server again on the same data and port, as a restarted ClickHouse would be. */
    async startClickHouse() {
      ch = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse"), port: ch.port });
      stopped = false;
    },
    /**
     * Starts the server again if a test stopped it and failed before starting it: for afterEach,
     * so that the next test fails for its own reason, not with ECONNREFUSED.
     */
    async ensureClickHouse() {
      if (!stopped) return;
      ch = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse"), port: ch.port });
      stopped = false;
    },
    async close() {
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
      await redis.quit().catch(() => redis.disconnect());
      await client.close();
      await ch.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An ingest worker on the pipeline's stores (and `extra` deps), started; the caller closes it. */
export function startIngestWorker(
  p: Pipeline,
  logger: Logger,
  extra: Partial<IngestWorkerDeps> = {},
): IngestWorker {
  const worker = createIngestWorker({
    config: p.config,
    redis: p.redis,
    clickhouse: p.client,
    logger,
    metrics: createWorkerMetrics(),
    ...extra,
  });
  worker.start();
  return worker;
}
