import { mb } from "./ceilings.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import { metricSum } from "./prometheus.js";
import { type ServiceProc, type Stack, waitStored } from "./stack.js";

// Phase 3: N workers start on the backlog the edge left and drain it into ClickHouse. The queue is
// paused while the workers start, so the clock starts for all of them at once, when it resumes,
// and stops when ClickHouse holds every report the edge accepted (polled, with a deadline).

export interface DrainPhase {
  rows: number;
  seconds: number;
  rowsPerSec: number;
  /** False when the deadline passed first (then rows/s covers what was stored by then). */
  complete: boolean;
  rowsPerInsert: number;
  insertMs: number;
  cpuCores: Record<string, number>;
  workerPeakRssMb: number[];
}

/** Rows per insert and milliseconds per insert, from the workers' own metrics. */
export async function insertStats(workers: ServiceProc[]) {
  let rows = 0;
  let inserts = 0;
  let seconds = 0;
  for (const w of workers) {
    const text = await w.metrics().catch(() => "");
    rows += metricSum(text, "headroom_worker_batch_rows_sum");
    inserts += metricSum(text, "headroom_worker_batch_rows_count");
    seconds += metricSum(text, "headroom_worker_insert_seconds_sum");
  }
  return { rows, inserts, seconds };
}

export async function runDrainPhase(
  stack: Stack,
  opts: { phase: string; expected: number; workers: number; timeoutS: number },
): Promise<DrainPhase> {
  await stack.pauseQueues();
  const workers = await stack.startWorkers(opts.workers);
  const chPid = stack.clickhouse.process.pid ?? 0;
  resetPeakRss(chPid);
  const before = await stack.rows(opts.phase);
  const stats0 = await insertStats(workers);
  const cpu = cpuMeter({
    ...Object.fromEntries(workers.map((w) => [w.name, w.pid])),
    clickhouse: chPid,
    ...stack.redisPids(),
  });
  await stack.resumeQueues();
  const { complete, seconds, stored } = await waitStored(
    stack,
    opts.phase,
    opts.expected,
    opts.timeoutS,
  );
  const cpuCores = cpu.read().cores;
  const stats = await insertStats(workers);
  const inserts = stats.inserts - stats0.inserts;
  return {
    rows: stored - before,
    seconds: Math.round(seconds * 1000) / 1000,
    rowsPerSec: seconds > 0 ? Math.round((stored - before) / seconds) : 0,
    complete,
    rowsPerInsert: Math.round((stats.rows - stats0.rows) / Math.max(1, inserts)),
    insertMs: Math.round(((stats.seconds - stats0.seconds) / Math.max(1, inserts)) * 1000),
    cpuCores,
    workerPeakRssMb: workers.map((w) => mb(peakRssBytes(w.pid))),
  };
}
