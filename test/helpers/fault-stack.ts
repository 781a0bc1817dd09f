import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from "@clickhouse/client";
import { expect } from "vitest";
import { type Proc, readyWorker, startProcess } from "../../fixtures/processes.js";
import { sampleBody } from "../../fixtures/sample-reports.js";
import { migrate } from "../../src/clickhouse/migrations.js";
import { loadConfig } from "../../src/config.js";
import { createKeyStore } from "../../src/keys/key-store.js";
import {
  type EmbeddedClickHouseProcess,
  spawnEmbeddedClickHouse,
} from "../../src/local/clickhouse/process.js";
import {
  type RedisServer,
  type RedisServerOptions,
  startRedisServer,
} from "../../src/local/redis-server.js";
import { createReportsQueue, type ReportsQueue } from "../../src/queue/reports-queue.js";
import { shardNames } from "../../src/queue/shards.js";
import { createWorkerRedis, type RedisClient } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import { eventually } from "./eventually.js";
import { freePort } from "./free-ports.js";

// A whole Headroom of its own for one fault test: its own redis-server (which the test may
// SIGKILL and restart), its own embedded ClickHouse server process, and the edge and workers as
// real processes started as a user starts them. Reports are tagged by sequence number in `app`,
// so every stored row can be traced back to the request that sent it and to its answer.

export interface FaultStackOptions {
  redis?: Omit<RedisServerOptions, "dir">;
  /**
   * Redis in another topology, started by the test (test/helpers/redis-topology/redis-cluster.ts,
   * redis-sentinel.ts): its settings. No redis-server of the stack's own is started then.
   */
  topology?: { env: Record<string, string> };
  clickhouse?: { faultErrorRate?: number; user?: string; password?: string };
  /** Settings for edge and workers on top of the defaults below. */
  env?: Record<string, string>;
}

export interface Stored {
  /** Rows in `reports`, duplicates included. */
  raw: number;
  /** Rows in `reports_v` (what analysts read). */
  final: number;
  /** `reports` summed over `reports_daily_v` and `reports_minute_v`. */
  daily: number;
  minute: number;
  /** Rows of `latest_limits_v`, and its requests_remaining. */
  latest: number;
  requestsRemaining: number | null;
}

export const tagOf = (seq: number) => `load-${seq}`;
export const seqOf = (app: string) => Number(app.slice(5));

/** sampleBody with the request's tag as its app: one group of its own in every view. */
export const taggedBody = (seq: number): Record<string, unknown> => ({
  ...sampleBody(seq),
  app: tagOf(seq),
});

export async function startFaultStack(opts: FaultStackOptions = {}) {
  const id = randomBytes(4).toString("hex");
  const dir = mkdtempSync(join(tmpdir(), "headroom-faults-"));
  const redisDir = join(dir, "redis");
  const redisOptions: RedisServerOptions = { dir: redisDir, appendfsync: "always", ...opts.redis };
  const chOptions = { path: join(dir, "clickhouse"), ...opts.clickhouse };
  const db = `f_${id}`;
  const project = `p-${id}`;
  const names = { prefix: `{f-${id}}`, name: "reports" };
  // ClickHouse may be answering errors on purpose: the harness's own queries try again.
  const retrying = async <T>(fn: () => Promise<T>): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (attempt >= 50) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };

  // A start that fails half way stops what it had started.
  const started: (() => Promise<unknown> | unknown)[] = [
    () => rmSync(dir, { recursive: true, force: true }),
  ];
  let redis: RedisServer | null = null;
  let ch: EmbeddedClickHouseProcess;
  let client: ClickHouseClient;
  let admin: RedisClient;
  let queues: ReportsQueue[];
  let key: string;
  const shards = shardNames(names, Number(opts.env?.QUEUE_SHARDS ?? 1));
  try {
    if (!opts.topology) {
      const own = await startRedisServer(redisOptions);
      redis = own;
      started.push(() => own.stop());
    }
    // The schema is made without faults; the fault mode, if any, starts after.
    ch = await spawnEmbeddedClickHouse({ ...chOptions, faultErrorRate: 0 });
    started.push(() => ch.stop());
    client = createClient({
      url: ch.url,
      username: opts.clickhouse?.user,
      password: opts.clickhouse?.password,
      request_timeout: 30_000,
      log: { level: ClickHouseLogLevel.OFF },
    });
    started.push(() => client.close());
    await migrate(client, { db, retentionDays: 30 });
    if (chOptions.faultErrorRate) {
      await ch.stop();
      ch = await spawnEmbeddedClickHouse({ ...chOptions, port: ch.port });
    }
    const redisEnv = opts.topology?.env ?? { REDIS_URL: redis?.url ?? "" };
    admin = createWorkerRedis(redisTopology(loadConfig(redisEnv)));
    admin.on("error", () => {});
    started.push(() => admin.disconnect());
    queues = shards.map((n) => createReportsQueue(admin, n));
    for (const q of queues) q.on("error", () => {});
    started.push(() => Promise.all(queues.map((q) => q.close())));
    ({ key } = await createKeyStore(admin).create(project, {
      plan: "unlimited",
      defaultPlan: "unlimited",
    }));
  } catch (err) {
    for (const undo of started.reverse()) await Promise.resolve(undo()).catch(() => {});
    throw err;
  }

  const env: Record<string, string> = {
    ...(opts.topology?.env ?? { REDIS_URL: (redis as RedisServer | null)?.url ?? "" }),
    QUEUE_PREFIX: names.prefix,
    QUEUE_NAME: names.name,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: db,
    ...(opts.clickhouse?.user ? { CLICKHOUSE_USER: opts.clickhouse.user } : {}),
    ...(opts.clickhouse?.password ? { CLICKHOUSE_PASSWORD: opts.clickhouse.password } : {}),
    MIGRATE_ON_START: "false",
    WORKER_METRICS_PORT: "0",
    // Any free port: two alerts workers (this file's and another file's) must not collide on 9102.
    ALERTS_METRICS_PORT: "0",
    LOG_LEVEL: "info",
    BATCH_MAX_WAIT_MS: "100",
    RETRY_MAX_DELAY_MS: "500",
    WORKER_LOCK_DURATION_MS: "2000",
    WORKER_STALLED_INTERVAL_MS: "1000",
    BACKLOG_CHECK_INTERVAL_MS: "50",
    // The load is far over the default burst; the limit is not what these tests are about.
    PLANS: JSON.stringify({ unlimited: { monthly: null, burst: 1_000_000 } }),
    ...opts.env,
  };

  const procs: Proc[] = [];
  const ownRedis = (): RedisServer => {
    if (!redis) throw new Error("this stack's Redis is the test's own topology");
    return redis;
  };

  const query = async <T>(sql: string): Promise<T[]> =>
    retrying(async () => {
      const rs = await client.query({
        query: sql,
        query_params: { p: project },
        format: "JSONCompactEachRow",
      });
      return rs.json<T>();
    });

  return {
    dir,
    db,
    project,
    key,
    env,
    client,
    /** The first shard's queue (the only one unless QUEUE_SHARDS is set). */
    queue: queues[0] as ReportsQueue,
    queues,
    admin,
    procs,
    get redis() {
      return ownRedis();
    },
    get clickhouse() {
      return ch;
    },

    async startEdge(extra: Record<string, string> = {}) {
      const port = await freePort();
      const proc = startProcess("src/main/edge.ts", {
        ...env,
        HOST: "127.0.0.1",
        PORT: String(port),
        ...extra,
      });
      procs.push(proc);
      await proc.waitFor(/edge ready/, 30_000);
      return { proc, port, url: `http://127.0.0.1:${port}` };
    },

    async startWorker(extra: Record<string, string> = {}) {
      const proc = startProcess("workers/ingest.ts", { ...env, ...extra });
      procs.push(proc);
      return readyWorker(proc);
    },

    /** SIGKILL: nothing is flushed beyond what the AOF already holds. */
    killRedis: () => ownRedis().kill(),
    /** The same port and AOF directory, as a supervisor restarting Redis would. */
    async restartRedis() {
      redis = await startRedisServer({ ...redisOptions, port: ownRedis().port });
    },

    async restartClickHouse(changes: { faultErrorRate?: number } = {}) {
      await ch.stop();
      ch = await spawnEmbeddedClickHouse({ ...chOptions, ...changes, port: ch.port });
    },

    query,

    /** What every view holds, per request tag. */
    async stored(): Promise<Map<number, Stored>> {
      const out = new Map<number, Stored>();
      const entry = (app: string) => {
        const seq = seqOf(app);
        let e = out.get(seq);
        if (!e) {
          e = { raw: 0, final: 0, daily: 0, minute: 0, latest: 0, requestsRemaining: null };
          out.set(seq, e);
        }
        return e;
      };
      const where = "WHERE project_id = {p:String}";
      for (const [app, n] of await query<[string, string]>(
        `SELECT app, count() FROM ${db}.reports ${where} GROUP BY app`,
      ))
        entry(app).raw = Number(n);
      for (const [app, n] of await query<[string, string]>(
        `SELECT app, count() FROM ${db}.reports_v ${where} GROUP BY app`,
      ))
        entry(app).final = Number(n);
      for (const [app, n] of await query<[string, string]>(
        `SELECT app, sum(reports) FROM ${db}.reports_daily_v ${where} GROUP BY app`,
      ))
        entry(app).daily = Number(n);
      for (const [app, n] of await query<[string, string]>(
        `SELECT app, sum(reports) FROM ${db}.reports_minute_v ${where} GROUP BY app`,
      ))
        entry(app).minute = Number(n);
      for (const [app, n, remaining] of await query<[string, string, string | null]>(
        `SELECT app, count(), any(requests_remaining) FROM ${db}.latest_limits_v ${where} GROUP BY app`,
      )) {
        const e = entry(app);
        e.latest = Number(n);
        e.requestsRemaining = remaining === null ? null : Number(remaining);
      }
      return out;
    },

    /**
     * Waits until every report answered 200 is stored and no job is left (waiting, delayed or
     * active); returns what is stored then. The deadline is for the workers to drain the queue.
     */
    async storedAfterDrain(ok: { seq: number }[], timeoutMs = 60_000) {
      await eventually(
        async () => {
          const stored = await this.stored();
          expect(ok.filter((o) => !stored.has(o.seq)).map((o) => o.seq)).toStrictEqual([]);
          expect(await this.backlog()).toBe(0);
        },
        { timeoutMs, intervalMs: 500 },
      );
      return this.stored();
    },

    /** Waiting, delayed and active jobs, over every shard. */
    async backlog(): Promise<number> {
      const counts = await Promise.all(
        queues.map((q) => q.getJobCounts("wait", "prioritized", "delayed", "active")),
      );
      return counts.flatMap((c) => Object.values(c)).reduce((a, b) => a + b, 0);
    },

    /** SIGTERM to every process still running; their exits, in start order. */
    async stopProcesses() {
      for (const p of procs) p.signal("SIGTERM");
      return Promise.all(procs.map((p) => p.exited));
    },

    async close() {
      for (const p of procs) p.signal("SIGKILL");
      await Promise.all(procs.map((p) => p.exited));
      await Promise.all(queues.map((q) => q.close().catch(() => {})));
      admin.disconnect();
      await client.close().catch(() => {});
      await ch.stop().catch(() => {});
      await redis?.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type FaultStack = Awaited<ReturnType<typeof startFaultStack>>;

/** Output lines that say a process failed badly: fatal logs, 500s, raw stack traces. */
export function crashLines(output: string): string[] {
  return output.split("\n").filter((l) => /"level":60|^\s+at |uncaught|unhandled/i.test(l));
}
