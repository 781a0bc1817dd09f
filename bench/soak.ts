import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from "@clickhouse/client";
import { Redis } from "ioredis";
import {
  type EmbeddedClickHouseProcess,
  spawnEmbeddedClickHouse,
} from "../src/local/clickhouse/process.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { ensureBuilt, entryArgs } from "../src/local/entry-command.js";
import { createKeyStore } from "../src/keys/key-store.js";
import { createReportsQueue } from "../src/queue/reports-queue.js";
import { freePort, type RedisServer, startRedisServer } from "../src/local/redis-server.js";

// `npm run soak`: the whole stack on this machine (redis-server, embedded ClickHouse server, an
// edge, N workers, each its own process) under a moderate, steady load for ten minutes. Every
// few seconds it samples the resident memory of every process; at the end it says whether
// memory stayed flat (first minute against last minute) and checks that every report answered
// 200 was stored exactly once. Exit code 0 when both hold.

const USAGE = `npm run soak -- [--minutes 10] [--rate 200] [--workers 2] [--sample-seconds 5]`;

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    minutes: { type: "string", default: "10" },
    rate: { type: "string", default: "200" },
    workers: { type: "string", default: "2" },
    "sample-seconds": { type: "string", default: "5" },
    help: { type: "boolean", default: false },
  },
});
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const MINUTES = Number(values.minutes);
const RATE = Number(values.rate);
const WORKERS = Number(values.workers);
const SAMPLE_MS = Number(values["sample-seconds"]) * 1000;
if (!(MINUTES >= 2 && RATE > 0 && WORKERS >= 1 && SAMPLE_MS >= 1000)) {
  process.stderr.write(`needs at least 2 minutes, a rate, a worker, samples >= 1 s\n${USAGE}\n`);
  process.exit(2);
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const log = (msg: string) =>
  process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const MiB = 1024 * 1024;

// ---- processes ------------------------------------------------------------------------------

const cleanups: (() => Promise<void> | void)[] = [];
async function cleanup() {
  for (const c of cleanups.splice(0).reverse()) {
    try {
      await c();
    } catch {
      // keep going: everything else must still be stopped
    }
  }
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    log(`${sig}: stopping everything`);
    void cleanup().then(() => process.exit(130));
  });
}

interface Service {
  name: string;
  child: ChildProcess;
  output: () => string;
}

function startService(name: string, entry: string, env: Record<string, string>): Service {
  const child = spawn(process.execPath, entryArgs(entry), {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Keep the tail only: a soak must not grow its own memory with its children's logs.
  let tail = "";
  const keep = (c: Buffer) => {
    tail = (tail + c.toString()).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  cleanups.push(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  });
  return { name, child, output: () => tail };
}

async function waitFor(service: Service, pattern: RegExp, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = pattern.exec(service.output());
    if (m) return m;
    if (service.child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${service.name}: no ${pattern}: ${service.output().slice(-2_000)}`);
}

function rssBytes(pid: number | undefined): number | null {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

// ---- load -----------------------------------------------------------------------------------

const PROVIDERS = ["openai", "anthropic", "openrouter", "groq"];
function body(i: number): string {
  const provider = PROVIDERS[i % PROVIDERS.length];
  const hint = i % 17 === 0;
  return JSON.stringify({
    app: ["chat", "search", "batch-jobs"][i % 3],
    provider,
    model: hint ? null : `model-${i % 5}`,
    timestamp: new Date().toISOString(),
    limits: {
      requests_limit: hint ? null : 10_000,
      requests_remaining: hint ? null : 10_000 - (i % 10_000),
      tokens_limit: hint ? null : 2_000_000,
      tokens_remaining: hint ? null : 2_000_000 - ((i * 137) % 2_000_000),
      reset_requests_ms: hint ? null : 6_000,
      reset_tokens_ms: hint ? null : 12_500,
    },
    ...(hint ? {} : { credits: provider === "openrouter" ? { request_cost: 0.00042 } : null }),
  });
}

/** Latency buckets in ms (fixed: the soak's own memory must not grow with the request count). */
const BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, Infinity];

function startLoad(url: string, key: string, durationMs: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const target = new URL("/api/report", url);
  const counts = { sent: 0, ok: 0, errors: 0, byStatus: new Map<number, number>() };
  const latency = new Array<number>(BUCKETS.length).fill(0);
  let inFlight = 0;
  let seq = 0;
  const started = performance.now();
  let resolveDone: () => void;
  const done = new Promise<void>((r) => {
    resolveDone = r;
  });

  const send = () => {
    const payload = body(seq++);
    const t0 = performance.now();
    counts.sent += 1;
    inFlight += 1;
    const finish = (status: number | null) => {
      inFlight -= 1;
      const ms = performance.now() - t0;
      const bucket = BUCKETS.findIndex((b) => ms <= b);
      latency[bucket] = (latency[bucket] ?? 0) + 1;
      if (status === null) counts.errors += 1;
      else {
        counts.byStatus.set(status, (counts.byStatus.get(status) ?? 0) + 1);
        if (status === 200) counts.ok += 1;
      }
      if (stopped && inFlight === 0) resolveDone();
    };
    const req = httpRequest(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
        },
        timeout: 30_000,
      },
      (res) => {
        res.resume();
        res.on("end", () => finish(res.statusCode ?? 0));
        res.on("error", () => finish(null));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => finish(null));
    req.end(payload);
  };

  // Open loop: requests are due at a fixed rate whatever the answers' speed (up to 32 at once).
  let stopped = false;
  const tick = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * RATE);
    while (seq < due && inFlight < 256) send();
    if (performance.now() - started >= durationMs) {
      stopped = true;
      clearInterval(tick);
      if (inFlight === 0) resolveDone();
    }
  }, 10);

  const quantile = (q: number) => {
    const total = latency.reduce((a, b) => a + b, 0);
    let seen = 0;
    for (let i = 0; i < latency.length; i++) {
      seen += latency[i] as number;
      if (seen >= q * total) return BUCKETS[i] as number;
    }
    return Infinity;
  };

  return {
    counts,
    quantile,
    finished: done.then(() => agent.destroy()),
  };
}

// ---- run ------------------------------------------------------------------------------------

interface Sample {
  at: number;
  rss: Record<string, number | null>;
}

async function main(): Promise<number> {
  // Edge, workers and the ClickHouse server run compiled, as deployed.
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), "headroom-soak-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));

  const redis: RedisServer = await startRedisServer({ dir: join(dir, "redis") });
  cleanups.push(() => redis.stop());
  const ch: EmbeddedClickHouseProcess = await spawnEmbeddedClickHouse({
    path: join(dir, "clickhouse"),
  });
  cleanups.push(() => ch.stop());
  const client: ClickHouseClient = createClient({
    url: ch.url,
    request_timeout: 120_000,
    log: { level: ClickHouseLogLevel.OFF },
  });
  cleanups.push(() => client.close());
  await migrate(client, { db: "soak", retentionDays: 30 });
  const admin = new Redis(redis.url, { maxRetriesPerRequest: null });
  cleanups.push(() => admin.disconnect());
  const names = { prefix: "{soak}", name: "reports" };
  const queue = createReportsQueue(admin, names);
  cleanups.push(() => queue.close());
  const { key } = await createKeyStore(admin).create("soak", {
    plan: "unlimited",
    defaultPlan: "unlimited",
  });
  log(`redis ${redis.url}, clickhouse ${ch.url}`);

  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    QUEUE_PREFIX: names.prefix,
    QUEUE_NAME: names.name,
    CLICKHOUSE_URL: ch.url,
    CLICKHOUSE_DATABASE: "soak",
    MIGRATE_ON_START: "false",
    WORKER_METRICS_PORT: "0",
    LOG_LEVEL: "warn",
  };
  const port = await freePort();
  const edge = startService("edge", "src/main/edge.ts", {
    ...env,
    HOST: "127.0.0.1",
    PORT: String(port),
    LOG_LEVEL: "info",
  });
  await waitFor(edge, /edge ready/);
  const workers = Array.from({ length: WORKERS }, (_, i) =>
    startService(`worker ${i + 1}`, "workers/ingest.ts", { ...env, LOG_LEVEL: "info" }),
  );
  await Promise.all(workers.map((w) => waitFor(w, /worker ready/)));

  const pids: Record<string, number | undefined> = {
    "redis-server": redis.process.pid,
    clickhouse: ch.process.pid,
    edge: edge.child.pid,
    ...Object.fromEntries(workers.map((w) => [w.name, w.child.pid])),
    "soak (load)": process.pid,
  };
  const durationMs = MINUTES * 60_000;
  log(
    `load: ${RATE} reports/s for ${MINUTES} min, ${WORKERS} workers, RSS every ${SAMPLE_MS / 1000} s`,
  );
  const load = startLoad(`http://127.0.0.1:${port}`, key, durationMs);
  const started = Date.now();
  const samples: Sample[] = [];
  const sample = () => {
    samples.push({
      at: Date.now() - started,
      rss: Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, rssBytes(pid)])),
    });
  };
  sample();
  const sampler = setInterval(sample, SAMPLE_MS);
  const progress = setInterval(async () => {
    const last = samples[samples.length - 1];
    const backlog = await queue.getWaitingCount().catch(() => -1);
    log(
      `${Math.round((Date.now() - started) / 1000)} s: sent ${load.counts.sent}, 200 ${load.counts.ok}, backlog ${backlog} jobs, RSS ${Object.entries(
        last?.rss ?? {},
      )
        .map(([n, b]) => `${n} ${b === null ? "-" : Math.round(b / MiB)}`)
        .join(", ")} MiB`,
    );
  }, 30_000);
  await load.finished;
  clearInterval(sampler);
  clearInterval(progress);
  sample();
  log("load done; waiting for the queue to drain");

  const scalar = async (sql: string) => {
    const rs = await client.query({ query: sql, format: "JSONCompactEachRow" });
    return Number((await rs.json<[string]>())[0]?.[0] ?? 0);
  };
  const drainDeadline = Date.now() + 120_000;
  while (Date.now() < drainDeadline) {
    const counts = await queue.getJobCounts("wait", "active", "delayed");
    const backlog = (counts.wait ?? 0) + (counts.active ?? 0) + (counts.delayed ?? 0);
    if (backlog === 0 && (await scalar("SELECT count() FROM soak.reports_v")) >= load.counts.ok)
      break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const stored = {
    raw: await scalar("SELECT count() FROM soak.reports"),
    distinct: await scalar("SELECT uniqExact(report_id) FROM soak.reports"),
    final: await scalar("SELECT count() FROM soak.reports_v"),
    daily: await scalar("SELECT sum(reports) FROM soak.reports_daily_v"),
    failedJobs: await queue.getFailedCount(),
  };
  const lag = await client.query({
    query: `SELECT quantiles(0.5, 0.99)(toUnixTimestamp64Milli(inserted_at) - toUnixTimestamp64Milli(received_at)) FROM soak.reports`,
    format: "JSONCompactEachRow",
  });
  const [[lagP50 = 0, lagP99 = 0] = []] = ((await lag.json<[number[]]>())[0] ?? []) as number[][];
  const crashed = [edge, ...workers].filter((s) => s.child.exitCode !== null);

  // ---- memory: first minute against last minute ----
  const window = (from: number, to: number) => samples.filter((s) => s.at >= from && s.at <= to);
  const first = window(0, 60_000);
  const lastMinute = window(durationMs - 60_000, durationMs + SAMPLE_MS);
  const avg = (xs: Sample[], name: string) => {
    const v = xs.map((s) => s.rss[name]).filter((x): x is number => x !== null && x !== undefined);
    return v.length ? v.reduce((a, b) => a + b, 0) / v.length : Number.NaN;
  };
  /** Least-squares slope of RSS over the second half of the run, in bytes per minute. */
  const trend = (name: string) => {
    const pts = samples
      .filter((s) => s.at >= durationMs / 2)
      .map((s) => [s.at / 60_000, s.rss[name]] as const)
      .filter((p): p is readonly [number, number] => typeof p[1] === "number");
    const mx = pts.reduce((a, p) => a + p[0], 0) / pts.length;
    const my = pts.reduce((a, p) => a + p[1], 0) / pts.length;
    const sxx = pts.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
    return sxx > 0 ? pts.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / sxx : Number.NaN;
  };
  const rows = Object.keys(pids).map((name) => {
    const a = avg(first, name);
    const b = avg(lastMinute, name);
    const max = Math.max(...samples.map((s) => s.rss[name] ?? 0));
    // Flat: the last minute within 10% (or 10 MiB, for small processes) of the first.
    const flat = b - a <= Math.max(10 * MiB, a * 0.1);
    return { name, a, b, max, flat, slope: trend(name) };
  });
  const fmt = (n: number) => (Number.isFinite(n) ? (n / MiB).toFixed(1) : "-");
  const table = [
    "| process | RSS 1st minute (MiB) | RSS last minute (MiB) | change | peak (MiB) | 2nd-half trend (MiB/min) | flat |",
    "|---|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.name} | ${fmt(r.a)} | ${fmt(r.b)} | ${((r.b / r.a - 1) * 100).toFixed(1)}% | ${fmt(r.max)} | ${(r.slope / MiB).toFixed(2)} | ${r.flat ? "yes" : "NO"} |`,
    ),
  ];
  const statuses = [...load.counts.byStatus.entries()].map(([s, n]) => `${s}: ${n}`).join(", ");
  const onceEach =
    stored.final === load.counts.ok &&
    stored.distinct === load.counts.ok &&
    stored.daily === load.counts.ok &&
    stored.failedJobs === 0;
  const flat = rows.every((r) => r.flat);
  const out = [
    `# Soak: ${MINUTES} min at ${RATE} reports/s, ${WORKERS} workers, ${samples.length} RSS samples`,
    "",
    ...table,
    "",
    `memory flat (first vs last minute): ${flat ? "yes" : "NO"}${
      flat
        ? ""
        : ` (not flat: ${rows
            .filter((r) => !r.flat)
            .map((r) => r.name)
            .join(", ")})`
    }`,
    `requests: ${load.counts.sent} sent, ${load.counts.ok} answered 200 (${statuses}), ${load.counts.errors} without an answer`,
    `latency: p50 <= ${load.quantile(0.5)} ms, p99 <= ${load.quantile(0.99)} ms`,
    `stored: ${stored.final} in reports_v, ${stored.distinct} distinct ids, ${stored.raw} raw rows, ${stored.daily} in reports_daily_v, ${stored.failedJobs} failed jobs`,
    `every 200 stored exactly once: ${onceEach ? "yes" : "NO"}`,
    `end-to-end lag (received -> inserted): p50 ${lagP50} ms, p99 ${lagP99} ms`,
    `processes crashed: ${crashed.length ? crashed.map((s) => s.name).join(", ") : "none"}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  return flat && onceEach && crashed.length === 0 && load.counts.errors === 0 ? 0 : 1;
}

let code = 1;
try {
  code = await main();
} catch (err) {
  log(`failed: ${(err as Error)?.stack ?? String(err)}`);
} finally {
  log("stopping every process the soak started");
  await cleanup();
}
process.exit(code);
