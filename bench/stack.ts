import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClickHouseClient } from "@clickhouse/client";
import { Redis } from "ioredis";
import { createClickHouse } from "../src/clickhouse/client.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { CONFIG_KEYS, loadConfig, type Plan } from "../src/config.js";
import { createKeyStore } from "../src/keys/key-store.js";
import {
  type EmbeddedClickHouseProcess,
  spawnEmbeddedClickHouse,
} from "../src/local/clickhouse/process.js";
import { freePort, type RedisServer, startRedisServer } from "../src/local/redis-server.js";
import { createReportsQueue, type ReportsQueue } from "../src/queue/reports-queue.js";
import { shardNames } from "../src/queue/shards.js";
import { type Child, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { pollUntil } from "./poll.js";
import { metricSum, scrape } from "./prometheus.js";
import { startReplicas } from "./replicas.js";

// The real stack the benchmark measures, all on this machine: its own redis-server (temp dir),
// with replicas when asked for, the embedded ClickHouse server process, N edge processes and N
// worker processes, all compiled (dist/), started as `npm start` and the image start them. Every
// piece is registered with the cleanup as soon as it exists.

const EDGE_ENTRY = "src/main/edge.ts";
const WORKER_ENTRY = "workers/ingest.ts";
export const BENCH_DB = "bench";
export const CEILING_DB = "bench_ceiling";
const QUEUE = { prefix: "{bench}", name: "reports" };

export interface ServiceProc {
  /** "edge" (one edge) or "edge 1", "edge 2", …; "worker 1", … */
  name: string;
  child: Child;
  pid: number;
  /** Reads the process's Prometheus metrics. */
  metrics(): Promise<string>;
}

export type EdgeProc = ServiceProc & { url: string };

export interface StackOptions {
  cleanup: Cleanup;
  /** node flags for the edge and workers (profiling). */
  nodeArgs?: (name: string) => string[];
  log: (msg: string) => void;
  /** QUEUE_SHARDS for edges and workers (not set when null or absent). */
  shards?: number | null;
  /** Replicas of the benchmark's Redis; REDIS_ACK_REPLICAS for the edges when > 0. */
  ackReplicas?: number;
}

/** Headroom settings taken from the benchmark's environment (they reach edge and workers). */
export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const ours = new Set(["REDIS_URL", "CLICKHOUSE_URL", "CLICKHOUSE_DATABASE", "HOST", "PORT"]);
  const out: Record<string, string> = {};
  for (const k of CONFIG_KEYS) {
    const v = env[k];
    if (v !== undefined && v !== "" && !ours.has(k)) out[k] = v;
  }
  return out;
}

export async function startStack(opts: StackOptions) {
  const { cleanup, log } = opts;
  const dir = mkdtempSync(join(tmpdir(), "headroom-bench-"));
  cleanup.add("remove temp dir", () => rmSync(dir, { recursive: true, force: true }));

  const redisServer: RedisServer = await startRedisServer({ dir: join(dir, "redis") });
  cleanup.add("stop redis-server", () => redisServer.stop());
  const admin = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  cleanup.add("close redis client", async () => {
    await admin.quit().catch(() => admin.disconnect());
  });
  log(`redis-server on ${redisServer.url}`);
  const replicas = await startReplicas(redisServer, admin, opts.ackReplicas ?? 0, dir, cleanup);
  if (replicas.length) log(`${replicas.length} replica(s) of it: ${replicas.map((r) => r.url)}`);

  const clickhouse: EmbeddedClickHouseProcess = await spawnEmbeddedClickHouse({
    path: join(dir, "clickhouse"),
  });
  cleanup.add("stop embedded clickhouse", () => clickhouse.stop());
  const settings = settingsFromEnv();
  // Passed through as they are: the settings belong to the service (issue 11).
  if (opts.shards != null) settings.QUEUE_SHARDS = String(opts.shards);
  if (replicas.length) settings.REDIS_ACK_REPLICAS = String(replicas.length);
  const env: Record<string, string> = {
    ...settings,
    REDIS_URL: redisServer.url,
    QUEUE_PREFIX: QUEUE.prefix,
    QUEUE_NAME: QUEUE.name,
    CLICKHOUSE_URL: clickhouse.url,
    CLICKHOUSE_DATABASE: BENCH_DB,
    CLICKHOUSE_REQUEST_TIMEOUT_MS: "120000",
    WORKER_METRICS_PORT: "0",
    MIGRATE_ON_START: "false",
    // "edge ready" / "worker ready" are info lines; per-request logging stays off.
    LOG_LEVEL: "info",
  };
  const config = loadConfig(env);
  // The reports queues the edges write to: one, or one per shard (QUEUE_SHARDS).
  const queueNames = shardNames(QUEUE, config.QUEUE_SHARDS);
  const queues: ReportsQueue[] = queueNames.map((n) => createReportsQueue(admin, n));
  cleanup.add("close queues", async () => {
    await Promise.all(queues.map((q) => q.close()));
  });
  // The same client a worker builds, so the insert ceiling goes through the same code.
  const ch: ClickHouseClient = createClickHouse(config);
  cleanup.add("close clickhouse client", () => ch.close());
  await migrate(ch, { db: BENCH_DB, retentionDays: 30 });
  await migrate(ch, { db: CEILING_DB, retentionDays: 30 });
  log(`embedded ClickHouse on ${clickhouse.url}`);

  const keyStore = createKeyStore(admin);
  const workers: ServiceProc[] = [];
  const edges: EdgeProc[] = [];
  const profileDir = (name: string) => {
    const flags = opts.nodeArgs?.(name) ?? [];
    for (const f of flags) {
      if (f.startsWith("--cpu-prof-dir=")) mkdirSync(f.slice(15), { recursive: true });
    }
    return flags;
  };

  const scalar = async (query: string, params: Record<string, unknown> = {}): Promise<number> => {
    const rs = await ch.query({ query, query_params: params, format: "JSONCompactEachRow" });
    const rows = await rs.json<[string | number]>();
    return Number(rows[0]?.[0] ?? 0);
  };

  const startEdge = async (name: string): Promise<EdgeProc> => {
    const port = await freePort();
    const child = spawnChild({
      name,
      entry: EDGE_ENTRY,
      env: { ...env, HOST: "127.0.0.1", PORT: String(port) },
      nodeArgs: profileDir(name.replace(/\s+/g, "-")),
      cleanup,
      onUnexpectedExit: log,
    });
    await child.waitFor(/edge ready/, 60_000);
    const url = `http://127.0.0.1:${port}`;
    return {
      name,
      child,
      pid: child.pid,
      url,
      metrics: () =>
        scrape(`${url}/metrics`, env.METRICS_TOKEN).catch((err: Error) => {
          throw new Error(`${err.message}\n${name} output:\n${child.tail().slice(-2_000)}`);
        }),
    };
  };

  return {
    dir,
    env,
    settings,
    redisServer,
    replicas,
    admin,
    clickhouse,
    ch,

    /** The processes of Redis by name: "redis", "redis replica 1", … */
    redisPids(): Record<string, number> {
      return {
        redis: redisServer.process.pid ?? 0,
        ...Object.fromEntries(
          replicas.map((r, i) => [`redis replica ${i + 1}`, r.process.pid ?? 0]),
        ),
      };
    },

    /** The reports queues, "{bench}:reports" or one per shard. */
    queueNames: () => queueNames.map((n) => `${n.prefix}:${n.name}`),

    async pauseQueues() {
      await Promise.all(queues.map((q) => q.pause()));
    },
    async resumeQueues() {
      await Promise.all(queues.map((q) => q.resume()));
    },
    /** Drops every job (the warm-up's); the queues stay running. */
    async dropQueues() {
      for (const q of queues) {
        // obliterate pauses the queue on its way; the workers started later must find it running.
        await q.obliterate({ force: true });
        await q.resume();
      }
    },

    /**
     * One key per project `bench-<phase>-<i>`, each project on the unlimited plan, with
     * `overrides` of its numbers when given.
     */
    async createKeys(phase: string, count: number, overrides?: Partial<Plan>): Promise<string[]> {
      const keys: string[] = [];
      for (let i = 0; i < count; i++) {
        const project = `bench-${phase}-${String(i).padStart(3, "0")}`;
        const { key } = await keyStore.create(project, {
          plan: "unlimited",
          defaultPlan: "unlimited",
        });
        if (overrides) await keyStore.setPlan(project, "unlimited", overrides);
        keys.push(key);
      }
      return keys;
    },

    /** `count` edge processes, each on a port of its own: "edge", or "edge 1", "edge 2", … */
    async startEdges(count: number): Promise<EdgeProc[]> {
      const names = Array.from({ length: count }, (_, i) =>
        count === 1 ? "edge" : `edge ${i + 1}`,
      );
      edges.push(...(await Promise.all(names.map(startEdge))));
      return edges;
    },

    async startWorkers(count: number): Promise<ServiceProc[]> {
      const started = Array.from({ length: count }, (_, i) =>
        spawnChild({
          name: `worker ${workers.length + i + 1}`,
          entry: WORKER_ENTRY,
          env,
          nodeArgs: profileDir(`worker-${workers.length + i + 1}`),
          cleanup,
          onUnexpectedExit: log,
        }),
      );
      const procs = await Promise.all(
        started.map(async (child) => {
          const m = await child.waitFor(/"metricsPort":(\d+)[^\n]*worker ready/, 60_000);
          const url = `http://127.0.0.1:${m[1]}/metrics`;
          return { name: child.name, child, pid: child.pid, metrics: () => scrape(url) };
        }),
      );
      workers.push(...procs);
      return procs;
    },

    workers: () => workers,

    /** Reports stored for the projects of one phase (raw rows, before any merge). */
    rows: (phase: string) =>
      scalar(`SELECT count() FROM ${BENCH_DB}.reports WHERE startsWith(project_id, {p:String})`, {
        p: `bench-${phase}-`,
      }),

    /** End-to-end lag of one phase's reports: when ClickHouse took them minus when the edge did. */
    async lagMs(phase: string): Promise<{ p50: number; p99: number; max: number }> {
      const rs = await ch.query({
        query: `SELECT quantiles(0.5, 0.99)(lag), max(lag) FROM (
            SELECT toUnixTimestamp64Milli(inserted_at) - toUnixTimestamp64Milli(received_at) AS lag
            FROM ${BENCH_DB}.reports WHERE startsWith(project_id, {p:String}))`,
        query_params: { p: `bench-${phase}-` },
        format: "JSONCompactEachRow",
      });
      const [row] = await rs.json<[number[], number]>();
      const [p50 = 0, p99 = 0] = row?.[0] ?? [];
      return { p50: Number(p50), p99: Number(p99), max: Number(row?.[1] ?? 0) };
    },

    /** Jobs waiting (and being worked on) in the reports queue(s). */
    async backlog(): Promise<{ waiting: number; active: number }> {
      const counts = await Promise.all(
        queues.map((q) => q.getJobCounts("wait", "prioritized", "delayed", "active")),
      );
      let waiting = 0;
      let active = 0;
      for (const c of counts) {
        waiting += (c.wait ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0);
        active += c.active ?? 0;
      }
      return { waiting, active };
    },

    async redisUsedMemory(): Promise<number> {
      const info = await admin.info("memory");
      return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
    },
  };
}

export type Stack = Awaited<ReturnType<typeof startStack>>;

/** Reports the edge has durably enqueued so far (from its own metrics). */
export const enqueuedReports = (metricsText: string) =>
  metricSum(metricsText, "headroom_reports_per_job_sum");

/**
 * Waits until ClickHouse holds `expected` reports of a phase. A job completes only after
 * ClickHouse acknowledged its rows, so an empty queue is watched first, in Redis, which keeps the
 * single-query embedded ClickHouse free for the workers' inserts; the count then confirms it.
 * Returns when it held (seconds from the call) and whether it did before the deadline.
 */
export async function waitStored(
  stack: Stack,
  phase: string,
  expected: number,
  timeoutS: number,
): Promise<{ complete: boolean; seconds: number; stored: number }> {
  const start = performance.now();
  const deadline = timeoutS * 1000;
  let seconds = 0;
  await pollUntil(
    async () => {
      const b = await stack.backlog();
      return b.waiting + b.active === 0;
    },
    { timeoutMs: deadline, intervalMs: 25 },
  );
  seconds = (performance.now() - start) / 1000;
  let stored = 0;
  const complete = await pollUntil(
    async () => {
      stored = await stack.rows(phase);
      return stored >= expected;
    },
    { timeoutMs: Math.max(1_000, deadline - (performance.now() - start)), intervalMs: 100 },
  );
  // Later than the queue said: the count is the truth.
  const counted = (performance.now() - start) / 1000;
  if (counted - seconds > 0.2) seconds = counted;
  return { complete, seconds, stored };
}
