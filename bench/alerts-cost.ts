import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@clickhouse/client";
import { Redis } from "ioredis";
import { startProcess } from "../fixtures/processes.js";
import { sampleRow } from "../fixtures/sample-reports.js";
import { createEvalQueue, createWebhookQueue } from "../src/alerts/queues.js";
import { createRuleStore } from "../src/alerts/rule-store.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { spawnEmbeddedClickHouse } from "../src/local/clickhouse/process.js";
import { ensureBuilt } from "../src/local/entry-command.js";
import { startRedisServer } from "../src/local/redis-server.js";
import { createReportsQueue, REPORT_JOB } from "../src/queue/reports-queue.js";

// Worker CPU per report with alerts off, on without rules, and on with one rule per project
// (every report watched: the worst case), ingest worker and alerts worker measured apart, from
// "ready" until the backlog is stored, evaluated and delivered.
//   npx tsx bench/alerts-cost.ts            # N=100000 reports per mode, MODES=off,no-rules,rules
const N = Number(process.env.N ?? 100_000);
const PER_JOB = 500;
const PROJECTS = 20;
const cpuMs = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(f[11]) + Number(f[12])) * 10;
};
const until = async (fn: () => Promise<boolean>, ms = 600_000) => {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error("timeout");
    await new Promise((r) => setTimeout(r, 100));
  }
};

async function run(mode: "off" | "no-rules" | "rules") {
  const dir = mkdtempSync(join(tmpdir(), "alerts-cost-"));
  const redisServer = await startRedisServer({ dir: join(dir, "redis") });
  const ch = await spawnEmbeddedClickHouse({ path: join(dir, "ch") });
  const client = createClient({ url: ch.url, request_timeout: 120_000 });
  await migrate(client, { db: "cost", retentionDays: 30 });
  const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  const prefix = "{cost}";
  const hook = createServer((_q, s) => s.end("{}"));
  await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/`;
  if (mode === "rules") {
    const rules = createRuleStore(redis, prefix);
    for (let i = 0; i < PROJECTS; i++) {
      await rules.create({
        project: `p${i}`,
        metric: "requests",
        warn_pct: 70,
        critical_pct: 90,
        webhook: url,
      });
    }
  }
  const queue = createReportsQueue(redis, { prefix, name: "reports" });
  const jobs = [];
  for (let j = 0; j < N / PER_JOB; j++) {
    const rows = [];
    for (let r = 0; r < PER_JOB; r++)
      rows.push(sampleRow(j * PER_JOB + r, `p${(j * PER_JOB + r) % PROJECTS}`));
    jobs.push({ name: REPORT_JOB, data: { v: 1 as const, rows } });
  }
  for (let i = 0; i < jobs.length; i += 50) await queue.addBulk(jobs.slice(i, i + 50));
  const env = {
    REDIS_URL: redisServer.url,
    QUEUE_PREFIX: prefix,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: "cost",
    MIGRATE_ON_START: "false",
    WORKER_METRICS_PORT: "0",
    LOG_LEVEL: "warn",
    ALERTS_ENABLED: mode === "off" ? "false" : "true",
    // The bench's receiver runs on loopback, allowed as an operator allows an internal one.
    ALERTS_WEBHOOK_ALLOW: "127.0.0.1",
  };
  const alerts = startProcess("workers/alerts.ts", { ...env, LOG_LEVEL: "info" });
  await alerts.waitFor(/alerts worker ready/, 60_000);
  const a0 = cpuMs(alerts.child.pid as number);
  const worker = startProcess("workers/ingest.ts", { ...env, LOG_LEVEL: "info" });
  await worker.waitFor(/worker ready/, 60_000);
  const w0 = cpuMs(worker.child.pid as number);
  const t0 = Date.now();
  const scalar = async (q: string) =>
    Number(
      (
        await (await client.query({ query: q, format: "JSONCompactEachRow" })).json<[string]>()
      )[0]?.[0],
    );
  await until(async () => (await scalar("SELECT count() FROM cost.reports")) >= N);
  const sum = (c: Record<string, number>) => Object.values(c).reduce((x, y) => x + y, 0);
  await until(async () => sum(await queue.getJobCounts("wait", "active")) === 0);
  const drainS = (Date.now() - t0) / 1000;
  const w1 = cpuMs(worker.child.pid as number);
  const evalQ = createEvalQueue(redis, prefix);
  const hooksQ = createWebhookQueue(redis, prefix, { attempts: 1, backoffMs: 1, keepDeadDays: 1 });
  const pending = async () => {
    const a = await evalQ.getJobCounts("wait", "active", "delayed");
    const b = await hooksQ.getJobCounts("wait", "active", "delayed");
    return sum(a) + sum(b);
  };
  await until(async () => (await pending()) === 0);
  const a1 = cpuMs(alerts.child.pid as number);
  const events = await scalar("SELECT count() FROM cost.alert_events");
  console.log(
    JSON.stringify({
      mode,
      reports: N,
      drain_s: drainS,
      ingest_cpu_ms: w1 - w0,
      ingest_us_per_report: ((w1 - w0) * 1000) / N,
      alerts_cpu_ms: a1 - a0,
      alerts_us_per_report: ((a1 - a0) * 1000) / N,
      events,
    }),
  );
  worker.signal("SIGTERM");
  alerts.signal("SIGTERM");
  await Promise.all([worker.exited, alerts.exited]);
  await evalQ.close();
  await hooksQ.close();
  await queue.close();
  await redis.quit();
  hook.close();
  await client.close();
  await ch.stop();
  await redisServer.stop();
  rmSync(dir, { recursive: true, force: true });
}

// The workers and the ClickHouse server run compiled, as deployed.
ensureBuilt();
for (const mode of (process.env.MODES ?? "off,no-rules,rules").split(",")) await run(mode as "off");
