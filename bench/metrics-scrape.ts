import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { createClient } from "@clickhouse/client";
import { createApi } from "../src/api/create-api.js";
import { migrate } from "../src/clickhouse/migrations.js";
import { loadConfig } from "../src/config.js";
import { createKeyStore } from "../src/keys/key-store.js";
import { ensureBuilt } from "../src/local/entry-command.js";
import { spawnEmbeddedClickHouse } from "../src/local/clickhouse/process.js";
import { startRedisServer } from "../src/local/redis-server.js";
import { createLogger } from "../src/lib/logger.js";

// `npx tsx bench/metrics-scrape.ts`: the time and size of one project's /api/v1/metrics scrape
// with --series series (provider, model, app), each with requests, tokens and credits figures
// and a few reports in the last minutes (so burn rates and exhaustion times exist). Reports are
// seeded by a direct insert; the read API runs in this process over its own redis-server and
// the embedded ClickHouse server, with the query cache off, so every scrape asks ClickHouse.

const { values } = parseArgs({
  options: {
    series: { type: "string", default: "1000" },
    reports: { type: "string", default: "6" },
    scrapes: { type: "string", default: "30" },
    // READ_METRICS_MAX_SERIES; default: every series.
    cap: { type: "string" },
  },
});
const SERIES = Number(values.series);
const PER_SERIES = Number(values.reports);
const SCRAPES = Number(values.scrapes);
const PROJECT = "bench-metrics";
const DB = "bench_metrics";

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

async function main() {
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), "headroom-bench-metrics-"));
  const redis = await startRedisServer({ dir: join(dir, "redis") });
  const ch = await spawnEmbeddedClickHouse({ path: join(dir, "clickhouse") });
  const client = createClient({ url: ch.url, request_timeout: 120_000 });
  try {
    await migrate(client, { db: DB, retentionDays: 30 });
    const now = Date.now();
    // Series i: provider i % 4, model (i / 4) % 5, app i / 20; report k is (PER_SERIES-1-k)
    // × 40 s old, each newer one with less remaining.
    await client.command({
      query: `INSERT INTO ${DB}.reports (report_id, project_id, key_id, app, provider, model,
          timestamp, received_at, requests_limit, requests_remaining, tokens_limit,
          tokens_remaining, reset_requests_ms, reset_tokens_ms, credits_limit, credits_remaining,
          request_cost)
        SELECT generateUUIDv4(number), {project:String}, 'key_seed',
          concat('app-', toString(intDiv(number % {n:UInt32}, 20))),
          arrayElement(['openai', 'anthropic', 'google', 'mistral'], number % {n:UInt32} % 4 + 1),
          concat('model-', toString(intDiv(number % {n:UInt32}, 4) % 5)),
          fromUnixTimestamp64Milli(toInt64({now:Int64} - ({k:UInt32} - 1 - intDiv(number, {n:UInt32})) * 40000), 'UTC') AS ts,
          ts,
          10000, toInt64(9000 - intDiv(number, {n:UInt32}) * 100 - number % {n:UInt32}),
          2000000, toInt64(1900000 - intDiv(number, {n:UInt32}) * 5000),
          3600000, 3600000,
          toDecimal128(100, 12), toDecimal128(90 - intDiv(number, {n:UInt32}) * 0.5, 12),
          toDecimal128(0.001, 12)
        FROM numbers({total:UInt64})`,
      query_params: { project: PROJECT, n: SERIES, k: PER_SERIES, now, total: SERIES * PER_SERIES },
    });

    const config = loadConfig({
      REDIS_URL: redis.url,
      CLICKHOUSE_URL: ch.url,
      CLICKHOUSE_DATABASE: DB,
      READ_CACHE_TTL_MS: "0",
      READ_RATE_PER_S: "100000",
      READ_BURST: "100000",
      READ_METRICS_MAX_SERIES: values.cap ?? String(Math.max(SERIES, 1)),
    });
    const api = await createApi(config, createLogger("warn", "bench"), { clickhouse: client });
    const key = (
      await createKeyStore(api.redis).create(PROJECT, {
        defaultPlan: "unlimited",
        scope: "read",
      })
    ).key;
    const url = await api.app.listen({ port: 0, host: "127.0.0.1" });
    const scrape = async (accept: string, path = "/api/v1/metrics") => {
      const t0 = performance.now();
      const res = await fetch(`${url}${path}`, {
        headers: { authorization: `Bearer ${key}`, accept },
      });
      const body = await res.text();
      if (!res.ok) throw new Error(`scrape: ${res.status} ${body}`);
      return { ms: performance.now() - t0, body };
    };
    const OM = "application/openmetrics-text;version=1.0.0";
    for (let i = 0; i < 3; i++) await scrape(OM);
    const times: number[] = [];
    let body = "";
    for (let i = 0; i < SCRAPES; i++) {
      const r = await scrape(OM);
      times.push(r.ms);
      body = r.body;
    }
    const text = (await scrape("text/plain")).body;
    // The same figures as JSON, for comparison: what the exporter adds to /headroom's queries.
    const headroomTimes: number[] = [];
    for (let i = 0; i < SCRAPES; i++) {
      headroomTimes.push((await scrape("application/json", "/api/v1/headroom")).ms);
    }
    times.sort((a, b) => a - b);
    headroomTimes.sort((a, b) => a - b);
    const samples = body.split("\n").filter((l) => l !== "" && !l.startsWith("#")).length;
    const exported = /^headroom_series_exported (\d+)$/m.exec(body)?.[1];
    const result = {
      series: Number(exported),
      samples,
      openmetrics_bytes: Buffer.byteLength(body),
      openmetrics_gzip_bytes: gzipSync(body, { level: 1 }).length,
      text_bytes: Buffer.byteLength(text),
      scrapes: SCRAPES,
      scrape_ms: {
        p50: Math.round(pct(times, 50)),
        p99: Math.round(pct(times, 99)),
        max: Math.round(times.at(-1) ?? 0),
      },
      headroom_json_ms: {
        p50: Math.round(pct(headroomTimes, 50)),
        p99: Math.round(pct(headroomTimes, 99)),
      },
    };
    console.log(JSON.stringify(result, null, 2));
    await api.close();
  } finally {
    await client.close();
    await ch.stop();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
