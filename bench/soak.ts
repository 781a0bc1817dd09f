import { parseArgs } from "node:util";
import { ensureBuilt } from "../src/local/entry-command.js";
import { runCommand } from "./cleanup.js";
import { slope } from "./phase-e2e.js";
import { rssBytes } from "./proc-stats.js";
import { writeLoadFiles } from "./report-bodies.js";
import { runLoad } from "./run-load.js";
import { BENCH_DB, startStack, waitStored } from "./stack.js";

// `npm run soak`: the benchmark's stack (redis-server, the embedded ClickHouse server, an edge, N
// workers, each its own process, compiled; bench/stack.ts) under a moderate load at a fixed rate
// (the open-loop client, bench/run-load.ts) for ten minutes. Every few seconds it samples the
// resident memory of every process; at the end it says whether memory stayed flat (first minute
// against last minute) and checks that every report answered 200 was stored exactly once. Exit
// code 0 when both hold.

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

const log = (msg: string) =>
  process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const MiB = 1024 * 1024;
const PHASE = "soak";

interface Sample {
  at: number;
  rss: Record<string, number | null>;
}

try {
  ensureBuilt();
} catch {
  process.exit(1); // the build said why on stderr
}

await runCommand(log, async (cleanup) => {
  const stack = await startStack({ cleanup, log });
  const keys = await stack.createKeys(PHASE, 1);
  const [edge] = await stack.startEdges(1);
  if (!edge) throw new Error("no edge");
  const workers = await stack.startWorkers(WORKERS);
  const pids: Record<string, number> = {
    ...stack.redisPids(),
    clickhouse: stack.clickhouse.process.pid ?? 0,
    edge: edge.pid,
    ...Object.fromEntries(workers.map((w) => [w.name, w.pid])),
  };
  const durationMs = MINUTES * 60_000;
  log(
    `load: ${RATE} reports/s for ${MINUTES} min, ${WORKERS} workers, RSS every ${SAMPLE_MS / 1000} s`,
  );

  const started = Date.now();
  const samples: Sample[] = [];
  const sample = () =>
    samples.push({
      at: Date.now() - started,
      rss: Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, rssBytes(pid)])),
    });
  sample();
  const sampler = setInterval(sample, SAMPLE_MS);
  const progress = setInterval(async () => {
    const last = samples[samples.length - 1];
    const backlog = await stack.backlog().catch(() => ({ waiting: -1 }));
    const rss = Object.entries(last?.rss ?? {})
      .map(([n, b]) => `${n} ${b === null ? "-" : Math.round(b / MiB)}`)
      .join(", ");
    log(
      `${Math.round((Date.now() - started) / 1000)} s: backlog ${backlog.waiting} jobs, RSS ${rss} MiB`,
    );
  }, 30_000);
  const load = await runLoad(
    {
      urls: [edge.url],
      ...writeLoadFiles(stack.dir, PHASE, keys),
      connections: 32,
      durationS: MINUTES * 60,
      mode: "fixed",
      rate: RATE,
    },
    cleanup,
  ).finally(() => {
    clearInterval(sampler);
    clearInterval(progress);
  });
  sample();
  log("load done; waiting for the queue to drain");
  await waitStored(stack, PHASE, load.ok, 120);

  const scalar = async (sql: string) => {
    const rs = await stack.ch.query({ query: sql, format: "JSONCompactEachRow" });
    return Number((await rs.json<[string]>())[0]?.[0] ?? 0);
  };
  const stored = {
    raw: await scalar(`SELECT count() FROM ${BENCH_DB}.reports`),
    distinct: await scalar(`SELECT uniqExact(report_id) FROM ${BENCH_DB}.reports`),
    final: await scalar(`SELECT count() FROM ${BENCH_DB}.reports_v`),
    daily: await scalar(`SELECT sum(reports) FROM ${BENCH_DB}.reports_daily_v`),
  };
  const lag = await stack.lagMs(PHASE);
  const crashed = [edge, ...workers].filter(
    (s) => s.child.process.exitCode !== null || s.child.process.signalCode !== null,
  );

  // Memory: first minute against last minute, and the trend over the second half.
  const window = (from: number, to: number) => samples.filter((s) => s.at >= from && s.at <= to);
  const first = window(0, 60_000);
  const lastMinute = window(durationMs - 60_000, durationMs + SAMPLE_MS);
  const avg = (xs: Sample[], name: string) => {
    const v = xs.map((s) => s.rss[name]).filter((x): x is number => typeof x === "number");
    return v.length ? v.reduce((a, b) => a + b, 0) / v.length : Number.NaN;
  };
  const rows = Object.keys(pids).map((name) => {
    const a = avg(first, name);
    const b = avg(lastMinute, name);
    const max = Math.max(...samples.map((s) => s.rss[name] ?? 0));
    // Flat: the last minute within 10% (or 10 MiB, for small processes) of the first.
    const flat = b - a <= Math.max(10 * MiB, a * 0.1);
    const half = samples
      .filter((s) => s.at >= durationMs / 2 && typeof s.rss[name] === "number")
      .map((s): [number, number] => [s.at / 60_000, s.rss[name] as number]);
    return { name, a, b, max, flat, slope: slope(half) };
  });
  const fmt = (n: number) => (Number.isFinite(n) ? (n / MiB).toFixed(1) : "-");
  const statuses = Object.entries(load.statuses)
    .map(([s, n]) => `${s}: ${n}`)
    .join(", ");
  const onceEach =
    stored.final === load.ok && stored.distinct === load.ok && stored.daily === load.ok;
  const flat = rows.every((r) => r.flat);
  const notFlat = rows.filter((r) => !r.flat).map((r) => r.name);
  const out = [
    `# Soak: ${MINUTES} min at ${RATE} reports/s, ${WORKERS} workers, ${samples.length} RSS samples`,
    "",
    "| process | RSS 1st minute (MiB) | RSS last minute (MiB) | change | peak (MiB) | 2nd-half trend (MiB/min) | flat |",
    "|---|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.name} | ${fmt(r.a)} | ${fmt(r.b)} | ${((r.b / r.a - 1) * 100).toFixed(1)}% | ${fmt(r.max)} | ${(r.slope / MiB).toFixed(2)} | ${r.flat ? "yes" : "NO"} |`,
    ),
    "",
    `memory flat (first vs last minute): ${flat ? "yes" : `NO (not flat: ${notFlat.join(", ")})`}`,
    `requests: ${load.sent} sent, ${load.ok} answered 200 (${statuses || "no other status"}), ${load.errors} without an answer, ${load.unsent} never sent`,
    `latency from each request's scheduled time: p50 ${load.latencyMs.p50} ms, p99 ${load.latencyMs.p99} ms`,
    `stored: ${stored.final} in reports_v, ${stored.distinct} distinct ids, ${stored.raw} raw rows, ${stored.daily} in reports_daily_v`,
    `every 200 stored exactly once: ${onceEach ? "yes" : "NO"}`,
    `end-to-end lag (received -> inserted): p50 ${lag.p50} ms, p99 ${lag.p99} ms`,
    `processes crashed: ${crashed.length ? crashed.map((s) => s.name).join(", ") : "none"}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  if (!(flat && onceEach && crashed.length === 0 && load.errors === 0)) {
    throw new Error("the soak's conditions did not all hold (above)");
  }
});
