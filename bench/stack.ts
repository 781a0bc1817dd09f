import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ClickHouseClient } from "@clickhouse/client";
import { Redis } from "ioredis";
import { createClickHouse } from "../src/clickhouse/client.js";
import {
  type EmbeddedClickHouseProcess,
  spawnEmbeddedClickHouse,
} from "../src/local/clickhouse/process.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { CONFIG_KEYS, loadConfig } from "../src/config.js";
import { createKeyStore } from "../src/keys/key-store.js";
import { createReportsQueue, type ReportsQueue } from "../src/queue/reports-queue.js";
import { freePort, type RedisServer, startRedisServer } from "../src/local/redis-server.js";
import { type Child, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { pollUntil } from "./poll.js";
import { metricSum, scrape } from "./prometheus.js";

// The real stack the benchmark measures, all on this machine: its own redis-server (temp dir),
// the embedded ClickHouse server process, the edge process and N worker processes, started as a
// user starts them. Every piece is registered with the cleanup as soon as it exists.

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const EDGE_ENTRY = join(ROOT, "src/main/edge.ts");
const WORKER_ENTRY = join(ROOT, "workers/ingest.ts");
export const BENCH_DB = "bench";
export const CEILING_DB = "bench_ceiling";
const QUEUE = { prefix: "{bench}", name: "reports" };

export interface ServiceProc {
  child: Child;
  pid: number;
  /** Reads the process's Prometheus metrics. */
  metrics(): Promise<string>;
}

export interface StackOptions {
  cleanup: Cleanup;
  /** node flags for the edge and workers (profiling). */
  nodeArgs?: (name: string) => string[];
  log: (msg: string) => void;
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
  const queue: ReportsQueue = createReportsQueue(admin, QUEUE);
  cleanup.add("close queue", () => queue.close());
  log(`redis-server on ${redisServer.url}`);

  const clickhouse: EmbeddedClickHouseProcess = await spawnEmbeddedClickHouse({
    path: join(dir, "clickhouse"),
  });
  cleanup.add("stop embedded clickhouse", () => clickhouse.stop());
  const settings = settingsFromEnv();
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
  // The same client a worker builds, so the insert ceiling goes through the same code.
  const ch: ClickHouseClient = createClickHouse(loadConfig(env));
  cleanup.add("close clickhouse client", () => ch.close());
  await migrate(ch, { db: BENCH_DB, retentionDays: 30 });
  await migrate(ch, { db: CEILING_DB, retentionDays: 30 });
  log(`embedded ClickHouse on ${clickhouse.url}`);

  const keyStore = createKeyStore(admin);
  const workers: ServiceProc[] = [];
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

  return {
    dir,
    env,
    settings,
    redisServer,
    admin,
    queue,
    clickhouse,
    ch,

    /** One key per project `bench-<phase>-<i>`, each project on the unlimited plan. */
    async createKeys(phase: string, count: number): Promise<string[]> {
      const keys: string[] = [];
      for (let i = 0; i < count; i++) {
        const project = `bench-${phase}-${String(i).padStart(3, "0")}`;
        const { key } = await keyStore.create(project, {
          plan: "unlimited",
          defaultPlan: "unlimited",
        });
        keys.push(key);
      }
      return keys;
    },

    async startEdge(): Promise<ServiceProc & { url: string }> {
      const port = await freePort();
      const child = spawnChild({
        name: "edge",
        entry: EDGE_ENTRY,
        env: { ...env, HOST: "127.0.0.1", PORT: String(port) },
        nodeArgs: profileDir("edge"),
        cleanup,
        onUnexpectedExit: log,
      });
      await child.waitFor(/edge ready/, 60_000);
      const url = `http://127.0.0.1:${port}`;
      return {
        child,
        pid: child.pid,
        url,
        metrics: () =>
          scrape(`${url}/metrics`, env.METRICS_TOKEN).catch((err: Error) => {
            throw new Error(`${err.message}\nedge output:\n${child.tail().slice(-2_000)}`);
          }),
      };
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
          return { child, pid: child.pid, metrics: () => scrape(url) };
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

    /** Jobs waiting (and being worked on) in the reports queue. */
    async backlog(): Promise<{ waiting: number; active: number }> {
      const c = await queue.getJobCounts("wait", "prioritized", "delayed", "active");
      return {
        waiting: (c.wait ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0),
        active: c.active ?? 0,
      };
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
