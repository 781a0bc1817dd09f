import { mb } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadResult, LoadSpec } from "./load-spec.js";
import { settledEnqueued } from "./phase-edge.js";
import { pollUntil } from "./poll.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import { runLoad } from "./run-load.js";
import { BENCH_DB, type ServiceProc, type Stack } from "./stack.js";

// Phase 4: edge and workers together, saturated or at a fixed rate. Beyond what the client sees,
// it measures what reached ClickHouse: the rate rows were stored during the phase, the end-to-end
// lag (inserted_at - received_at) of the phase's reports, the backlog over time, and how long the
// pipeline needed after the load stopped to store every accepted report.

export interface EndToEndPhase {
  load: LoadResult;
  enqueued: number;
  /** Rows stored per second while the load ran (after a short warm-up). */
  storedPerSec: number;
  /** min(accepted/s, stored/s): what the pipeline carries all the way. */
  sustainedPerSec: number;
  lagMs: { p50: number; p99: number; max: number };
  backlogEndJobs: number;
  /** Least-squares slope of waiting jobs over the second half of the phase. */
  backlogSlopeJobsPerSec: number;
  backlogGrowing: boolean;
  /** Seconds after the load stopped until ClickHouse held every accepted report. */
  drainAfterS: number;
  complete: boolean;
  peakRssMb: Record<string, number>;
  cpuCores: Record<string, number>;
}

export function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export async function runEndToEndPhase(
  stack: Stack,
  edge: ServiceProc & { url: string },
  opts: {
    phase: string;
    keys: string[];
    connections: number;
    durationS: number;
    mode: LoadSpec["mode"];
    rate?: number;
    timeoutS: number;
  },
  cleanup: Cleanup,
): Promise<EndToEndPhase> {
  const pids: Record<string, number> = {
    edge: edge.pid,
    ...Object.fromEntries(stack.workers().map((w, i) => [`worker ${i + 1}`, w.pid])),
    clickhouse: stack.clickhouse.process.pid ?? 0,
    redis: stack.redisServer.process.pid ?? 0,
  };
  for (const pid of Object.values(pids)) resetPeakRss(pid);
  const before = await settledEnqueued(edge);
  const cpu = cpuMeter(pids);

  // Backlog samples (epoch ms, waiting jobs) while the load runs; bounded in count.
  const samples: [number, number][] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling && samples.length < 10_000) {
      const b = await stack.backlog().catch(() => null);
      if (b) samples.push([Date.now(), b.waiting]);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();

  const load = await runLoad(
    {
      url: edge.url,
      keys: opts.keys,
      connections: opts.connections,
      durationS: opts.durationS,
      mode: opts.mode,
      rate: opts.rate,
    },
    cleanup,
  );
  const loadEnd = performance.now();
  sampling = false;
  await sampler;
  const cpuCores = cpu.read();
  const backlogEndJobs = (await stack.backlog()).waiting;
  const after = await settledEnqueued(edge);
  const enqueued = after.reports - before.reports;

  let stored = 0;
  const complete = await pollUntil(
    async () => {
      stored = await stack.rows(opts.phase);
      return stored >= enqueued;
    },
    { timeoutMs: opts.timeoutS * 1000, intervalMs: 100 },
  );
  const drainAfterS = (performance.now() - loadEnd) / 1000;

  // Stored rate over the sending window, after a warm-up that covers the first batches' wait.
  const warmupMs = Math.min(2_000, (opts.durationS * 1000) / 4);
  const from = load.startedAt + warmupMs;
  const to = load.startedAt + load.durationS * 1000;
  const rs = await stack.ch.query({
    query: `SELECT count() FROM ${BENCH_DB}.reports WHERE startsWith(project_id, {p:String})
      AND inserted_at >= fromUnixTimestamp64Milli({from:Int64}, 'UTC')
      AND inserted_at < fromUnixTimestamp64Milli({to:Int64}, 'UTC')`,
    query_params: { p: `bench-${opts.phase}-`, from, to },
    format: "JSONCompactEachRow",
  });
  const [[inWindow = 0] = []] = await rs.json<[number | string]>();
  const storedPerSec = Math.round(Number(inWindow) / ((to - from) / 1000));

  const midpoint = load.startedAt + (load.durationS * 1000) / 2;
  const half = samples
    .filter(([t]) => t >= midpoint)
    .map(([t, y]): [number, number] => [t / 1000, y]);
  const backlogSlopeJobsPerSec = Math.round(slope(half) * 100) / 100;
  const acceptedPerSec = load.okPerSec;
  return {
    load,
    enqueued,
    storedPerSec,
    sustainedPerSec: Math.min(acceptedPerSec, storedPerSec),
    lagMs: await stack.lagMs(opts.phase),
    backlogEndJobs,
    backlogSlopeJobsPerSec,
    // Growing: more than a job a second, and more than a couple of batches' worth left.
    backlogGrowing: backlogSlopeJobsPerSec > 1 && backlogEndJobs > 10,
    drainAfterS: Math.round(drainAfterS * 100) / 100,
    complete,
    peakRssMb: Object.fromEntries(Object.entries(pids).map(([n, p]) => [n, mb(peakRssBytes(p))])),
    cpuCores,
  };
}
