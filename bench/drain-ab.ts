import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { sampleRow } from "../fixtures/sample-reports.js";
import { ensureBuilt } from "../src/local/entry-command.js";
import { createReportsQueue, REPORT_JOB } from "../src/queue/reports-queue.js";
import type { ReportRow } from "../src/report/report-schema.js";
import { ROW_SHAPES } from "../src/report/row-shapes.js";
import { measureClickHouseInsert } from "./ceilings.js";
import { spawnChild } from "./child.js";
import { createCleanup } from "./cleanup.js";
import { cpuMeter } from "./proc-stats.js";
import { metricSum, scrape } from "./prometheus.js";
import { startStack, waitStored } from "./stack.js";

// Phase 3 of the benchmark on its own, for comparing worker builds (A/B/A/B) in one stack: each
// round queues a backlog of jobs as the edge's group commit makes them (`--job` rows each), then
// measures the raw insert ceiling, then one worker of each build draining its own backlog.
// Usage: tsx bench/drain-ab.ts --build A=<dir with dist/> --build B=.[@node-flag,...] [--rows N]
// [--rounds R] [--profile DIR]
// A build's dir holds a compiled dist/ and resolves node_modules from there (a copy inside the
// checkout works).

const { values } = parseArgs({
  options: {
    build: { type: "string", multiple: true, default: ["current=."] },
    rows: { type: "string", default: "300000" },
    job: { type: "string", default: "256" },
    rounds: { type: "string", default: "2" },
    ceiling: { type: "string", default: "3" },
    profile: { type: "string" },
  },
});
const builds = (values.build as string[]).map((b) => {
  const name = b.slice(0, b.indexOf("="));
  const rest = b.slice(b.indexOf("=") + 1);
  const [dir, flags] = rest.split("@") as [string, string | undefined];
  const entry = resolve(dir, "dist/workers/ingest.js");
  if (!existsSync(entry)) throw new Error(`${entry} is missing`);
  return { name, entry, nodeFlags: flags ? flags.split(",") : [] };
});
const totalRows = Number(values.rows);
const perJob = Number(values.job);
const log = (msg: string) =>
  process.stderr.write(`[drain-ab ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

ensureBuilt();
const cleanup = createCleanup();
cleanup.onSignals(log);
try {
  const stack = await startStack({ cleanup, log });
  const q = createReportsQueue(stack.admin, { prefix: "{bench}", name: "reports" });
  cleanup.add("close queue", () => q.close());
  const template: ReportRow[] = Array.from({ length: 4096 }, (_, i) => sampleRow(i, "x"));

  async function fill(phase: string) {
    await stack.pauseQueues();
    const now = Date.now();
    let made = 0;
    let jobs: { name: string; data: { v: number; rows: ReportRow[] } }[] = [];
    while (made < totalRows) {
      const rows: ReportRow[] = [];
      for (let i = 0; i < perJob && made < totalRows; i++, made++) {
        const r = (template[made % template.length] as ReportRow).slice();
        r[0] = crypto.randomUUID();
        r[1] = `bench-${phase}-${String(made % 20).padStart(3, "0")}`;
        r[7] = new Date(now).toISOString().replace("T", " ").replace("Z", "");
        rows.push(r);
      }
      jobs.push({ name: REPORT_JOB, data: { v: ROW_SHAPES.current, rows } });
      if (jobs.length === 50) {
        await q.addBulk(jobs);
        jobs = [];
      }
    }
    if (jobs.length) await q.addBulk(jobs);
  }

  const results: Record<string, string[]> = {};
  for (let round = 1; round <= Number(values.rounds); round++) {
    const ceiling = await measureClickHouseInsert(stack, {
      seconds: Number(values.ceiling),
      rowsPerInsert: 20_000,
    });
    const perRow = (s: number) => ((s * 1e6) / ceiling.rows).toFixed(2);
    log(
      `round ${round}: raw insert ${ceiling.rowsPerSec} rows/s (CH ${perRow(ceiling.cpuSeconds["clickhouse (raw insert)"] ?? 0)} µs/row, client ${perRow(ceiling.cpuSeconds["benchmark process"] ?? 0)} µs/row)`,
    );
    for (const b of builds) {
      const phase = `r${round}${b.name.toLowerCase().replace(/[^a-z0-9]/g, "")}`;
      await fill(phase);
      const profDir = values.profile ? join(values.profile, `${b.name}-${round}`) : null;
      const child = spawnChild({
        name: `worker ${b.name}`,
        command: process.execPath,
        args: [
          ...b.nodeFlags,
          ...(profDir ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []),
          b.entry,
        ],
        env: stack.env,
        cleanup,
        onUnexpectedExit: log,
      });
      const ready = await child.waitFor(/"metricsPort":(\d+)[^\n]*worker ready/, 60_000);
      const metricsUrl = `http://127.0.0.1:${ready[1]}/metrics`;
      const cpu = cpuMeter({
        worker: child.pid,
        clickhouse: stack.clickhouse.process.pid ?? 0,
        ...stack.redisPids(),
      });
      await stack.resumeQueues();
      const { complete, seconds, stored } = await waitStored(stack, phase, totalRows, 120);
      const used = cpu.read();
      const metrics = await scrape(metricsUrl);
      const inserts = metricSum(metrics, "headroom_worker_batch_rows_count");
      await child.stop();
      const rps = Math.round(stored / seconds);
      const per = (k: string) => (((used.seconds[k] ?? 0) * 1e6) / stored).toFixed(2);
      const line = `${b.name}: ${rps} rows/s = ${(rps / ceiling.rowsPerSec).toFixed(2)}x raw; ${seconds.toFixed(2)} s${complete ? "" : " INCOMPLETE"}; ${Math.round(stored / Math.max(1, inserts))} rows/insert; µs/row worker ${per("worker")} clickhouse ${per("clickhouse")} redis ${per("redis")}; machine outside ${((used.cores.machine ?? 0) - (used.cores.worker ?? 0) - (used.cores.clickhouse ?? 0) - (used.cores.redis ?? 0)).toFixed(2)} cores`;
      log(`  ${line}`);
      results[b.name] = [...(results[b.name] ?? []), line];
    }
  }
  for (const [name, lines] of Object.entries(results)) {
    process.stdout.write(`${name}\n${lines.map((l) => `  ${l}`).join("\n")}\n`);
  }
} catch (err) {
  log(`failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exitCode = 1;
} finally {
  await cleanup.run();
}
process.exit();
