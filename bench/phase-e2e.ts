import { mb } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadResult, LoadSpec } from "./load-spec.js";
import { settledEnqueued, withEdgeStatuses } from "./phase-edge.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import type { LoadFiles } from "./report-bodies.js";
import { runLoad } from "./run-load.js";
import { BENCH_DB, type EdgeProc, type Stack, waitStored } from "./stack.js";

// Phase 4: edges and workers together, saturated or at a fixed rate. Beyond what the client
// sees, it measures what reached ClickHouse: the rate rows were stored during the phase, the
// end-to-end lag (inserted_at - received_at) of the phase's reports, the backlog over time, how
// long the pipeline needed after the load stopped to store every accepted report, and the CPU
// each process spent from the start of the load until then (the capacity table's source).

export interface EndToEndPhase {
  load: LoadResult;
  enqueued: number;
  /** Rows stored per second over the time they took to flow (see below). */
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
  /** Cores used on average while the load ran. */
  cpuCores: Record<string, number>;
  /**
   * CPU seconds from the start of the load until ClickHouse held every accepted report: what
   * carrying the phase's `enqueued` reports all the way cost each process.
   */
  cpuSecondsToStored: Record<string, number>;
  jobs: number;
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
  edges: EdgeProc[],
  opts: {
    phase: string;
    files: LoadFiles;
    connections: number;
    durationS: number;
    mode: LoadSpec["mode"];
    rate?: number;
    timeoutS: number;
    /**
     * Starts reports sent to the same edges beside the phase's load (read-touch.ts), once the
     * edges' count before the phase has settled: waited for after the load, and the reports the
     * edges accepted taken from what they enqueued.
     */
    beside?: () => Promise<{ rows: number }>;
  },
  cleanup: Cleanup,
): Promise<EndToEndPhase> {
  const pids: Record<string, number> = {
    ...Object.fromEntries(edges.map((e) => [e.name, e.pid])),
    ...Object.fromEntries(stack.workers().map((w) => [w.name, w.pid])),
    clickhouse: stack.clickhouse.process.pid ?? 0,
    ...stack.redisPids(),
  };
  for (const pid of Object.values(pids)) resetPeakRss(pid);
  const before = await settledEnqueued(edges);
  const beside = opts.beside?.();
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
      urls: edges.map((e) => e.url),
      ...opts.files,
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
  const cpuCores = cpu.read().cores;
  const backlogEndJobs = (await stack.backlog()).waiting;
  const besideReports = (await beside)?.rows ?? 0;
  const after = await settledEnqueued(edges);
  const enqueued = after.reports - before.reports - besideReports;

  const { complete } = await waitStored(stack, opts.phase, enqueued, opts.timeoutS);
  const drainAfterS = (performance.now() - loadEnd) / 1000;
  const cpuSecondsToStored = cpu.read().seconds;

  // Stored rate: the phase's reports over the time they took to flow, from the first one the edge
  // received to the last one ClickHouse stored, less the typical lag (which a pipeline that keeps
  // up adds once, at the end). A pipeline that falls behind stores its last reports late: lower.
  const lagMs = await stack.lagMs(opts.phase);
  const rs = await stack.ch.query({
    query: `SELECT count(),
        toUnixTimestamp64Milli(max(inserted_at)) - toUnixTimestamp64Milli(min(received_at))
      FROM ${BENCH_DB}.reports WHERE startsWith(project_id, {p:String})`,
    query_params: { p: `bench-${opts.phase}-` },
    format: "JSONCompactEachRow",
  });
  const [[count = 0, spanMs = 0] = []] = await rs.json<[number | string, number | string]>();
  const flowS = Math.max(load.durationS, (Number(spanMs) - lagMs.p50) / 1000);
  const storedPerSec = Math.round(Number(count) / flowS);

  const midpoint = load.startedAt + (load.durationS * 1000) / 2;
  const half = samples
    .filter(([t]) => t >= midpoint)
    .map(([t, y]): [number, number] => [t / 1000, y]);
  const backlogSlopeJobsPerSec = Math.round(slope(half) * 100) / 100;
  const acceptedPerSec = load.okPerSec;
  return {
    load: withEdgeStatuses(load, before, after),
    enqueued,
    jobs: after.jobs - before.jobs,
    storedPerSec,
    sustainedPerSec: Math.min(acceptedPerSec, storedPerSec),
    lagMs,
    backlogEndJobs,
    backlogSlopeJobsPerSec,
    // Growing: more than a job a second, and more than a couple of batches' worth left.
    backlogGrowing: backlogSlopeJobsPerSec > 1 && backlogEndJobs > 10,
    drainAfterS: Math.round(drainAfterS * 100) / 100,
    complete,
    peakRssMb: Object.fromEntries(Object.entries(pids).map(([n, p]) => [n, mb(peakRssBytes(p))])),
    cpuCores,
    cpuSecondsToStored,
  };
}
