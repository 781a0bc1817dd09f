import { Redis } from "ioredis";
import { v7 as uuidv7 } from "uuid";
import { sampleRow } from "../fixtures/sample-reports.js";
import { createReportSink } from "../src/clickhouse/report-sink.js";
import { windowCellsOf } from "../src/clickhouse/report-windows.js";
import { reportRowBinary } from "../src/clickhouse/row-binary.js";
import { createReportsQueue, REPORT_JOB } from "../src/queue/reports-queue.js";
import type { ReportRow } from "../src/report/report-schema.js";
import { ROW_SHAPES } from "../src/report/row-shapes.js";
import { spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadResult } from "./load-spec.js";
import { cpuMeter, peakRssBytes } from "./proc-stats.js";
import type { LoadFiles } from "./report-bodies.js";
import { runLoad } from "./run-load.js";
import { CEILING_DB, type Stack } from "./stack.js";

// What this machine can do at most, for each stage, measured with the same tools and data as
// Headroom: a bare Fastify server behind the same load generator (the edge's ceiling), raw BullMQ
// addBulk of report jobs (the enqueue's), and raw inserts through the worker's own sink into the
// same table with the same materialized views (the worker's): RowBinary, the fastest format
// ClickHouse takes over HTTP from Node, encoded by the worker's encoder, one client, no queue.

const BARE_ENTRY = "bench/bare-server.ts";

export interface BareCeiling {
  load: LoadResult;
  cpuCores: Record<string, number>;
  serverPeakRssMb: number;
}

export async function measureBareFastify(
  opts: { files: LoadFiles; connections: number; durationS: number; warmupS: number },
  cleanup: Cleanup,
): Promise<BareCeiling> {
  const server = spawnChild({ name: "bare fastify", entry: BARE_ENTRY, args: ["0"], cleanup });
  try {
    const m = await server.waitFor(/bare ready (\d+)/, 30_000);
    const spec = {
      urls: [`http://127.0.0.1:${m[1]}`],
      ...opts.files,
      connections: opts.connections,
      mode: "saturate" as const,
    };
    // Like the edge, measured warm: the first seconds of a process run unoptimised code.
    await runLoad({ ...spec, durationS: opts.warmupS }, cleanup);
    const cpu = cpuMeter({ "bare Fastify": server.pid });
    const load = await runLoad({ ...spec, durationS: opts.durationS }, cleanup);
    return {
      load,
      cpuCores: cpu.read().cores,
      serverPeakRssMb: mb(peakRssBytes(server.pid)),
    };
  } finally {
    await server.stop();
  }
}

export interface EnqueueCeiling {
  reportsPerSec: number;
  reports: number;
  reportsPerJob: number;
  inFlight: number;
  /** Redis used_memory growth per queued report with jobs of this size. */
  redisBytesPerReport: number;
}

/** Rows as the edge makes them, built once and reused (Redis stores each job's copy). */
function sampleRows(count: number, project: string): ReportRow[] {
  return Array.from({ length: count }, (_, i) => sampleRow(i, project));
}

export async function measureBullmqAddBulk(
  stack: Stack,
  opts: { seconds: number; reportsPerJob: number; inFlight?: number; maxReports?: number },
): Promise<EnqueueCeiling> {
  const inFlight = opts.inFlight ?? 8;
  const maxReports = opts.maxReports ?? 3_000_000;
  // A connection of its own, configured like the edge's producer connection.
  const redis = new Redis(stack.redisServer.url, { enableOfflineQueue: false });
  await new Promise<void>((resolve, reject) => {
    redis.once("ready", resolve);
    redis.once("error", reject);
  });
  const queue = createReportsQueue(redis, { prefix: "{bench}", name: "ceiling" });
  const rows = Array.from({ length: 8 }, (_, j) =>
    sampleRows(opts.reportsPerJob, `bench-ceiling-${j}`),
  );
  try {
    const before = await stack.redisUsedMemory();
    let reports = 0;
    const start = performance.now();
    const deadline = start + opts.seconds * 1000;
    const lane = async (j: number) => {
      while (performance.now() < deadline && reports < maxReports) {
        const data = { v: 1 as const, rows: rows[j % rows.length] as ReportRow[] };
        await queue.addBulk([{ name: REPORT_JOB, data }]);
        reports += opts.reportsPerJob;
      }
    };
    await Promise.all(Array.from({ length: inFlight }, (_, j) => lane(j)));
    const seconds = (performance.now() - start) / 1000;
    const after = await stack.redisUsedMemory();
    return {
      reportsPerSec: Math.round(reports / seconds),
      reports,
      reportsPerJob: opts.reportsPerJob,
      inFlight,
      redisBytesPerReport: Math.round((after - before) / Math.max(1, reports)),
    };
  } finally {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    await redis.quit().catch(() => redis.disconnect());
  }
}

export interface InsertCeiling {
  rowsPerSec: number;
  rows: number;
  rowsPerInsert: number;
  inserts: number;
  cpuCores: Record<string, number>;
  /** CPU seconds over the measurement: the server's, and the client's (the benchmark process). */
  cpuSeconds: Record<string, number>;
}

export async function measureClickHouseInsert(
  stack: Stack,
  opts: { seconds: number; rowsPerInsert: number; maxInserts?: number },
): Promise<InsertCeiling> {
  const sink = createReportSink(stack.ch, CEILING_DB);
  const template = sampleRows(opts.rowsPerInsert, "bench-ceiling-0");
  // The sink sends JSON for rows RowBinary would not store exactly: these must not be such.
  if (!reportRowBinary(ROW_SHAPES.columns)?.(template, windowCellsOf(ROW_SHAPES.columns)))
    throw new Error("the ceiling's rows do not encode as RowBinary");
  const maxInserts = opts.maxInserts ?? 1_000;
  // Warm-up: the first insert into a fresh table pays for things the steady state does not.
  await sink.insert(withFreshIds(template), uuidv7());
  const cpu = cpuMeter({
    "clickhouse (raw insert)": stack.clickhouse.process.pid ?? 0,
    // The client side of the insert (serialising rows) runs in the benchmark's own process.
    "benchmark process": process.pid,
  });
  let inserts = 0;
  let busy = 0;
  const start = performance.now();
  const deadline = start + opts.seconds * 1000;
  while (performance.now() < deadline && inserts < maxInserts) {
    // New report ids each time: identical blocks would be deduplicated, not written.
    const rows = withFreshIds(template);
    const t = performance.now();
    await sink.insert(rows, uuidv7());
    busy += performance.now() - t;
    inserts++;
  }
  const rows = inserts * opts.rowsPerInsert;
  const used = cpu.read();
  return {
    // Time inside inserts only: building the next batch is the worker's cost, not ClickHouse's.
    rowsPerSec: Math.round(rows / (busy / 1000)),
    rows,
    rowsPerInsert: opts.rowsPerInsert,
    inserts,
    cpuCores: used.cores,
    cpuSeconds: used.seconds,
  };
}

function withFreshIds(rows: ReportRow[]): ReportRow[] {
  const now = Date.now();
  return rows.map((r) => {
    const copy = r.slice();
    copy[0] = uuidv7({ msecs: now });
    return copy;
  });
}

export const mb = (bytes: number | null) => Math.round(((bytes ?? 0) / 1024 ** 2) * 10) / 10;
