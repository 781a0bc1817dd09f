import { mb } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadResult, SaturatingGenerator } from "./load-spec.js";
import { settledEnqueued, withEdgeStatuses } from "./phase-edge.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import { type LoadFiles, writeBatchFiles } from "./report-bodies.js";
import { runLoad } from "./run-load.js";
import { type EdgeProc, type Stack, waitStored } from "./stack.js";

// Phase 2b: the edge(s) alone, saturated with POST /api/reports carrying batches of realistic
// reports (the sample mix, stamped at the phase's start, no client ids): what a report costs the
// edge inside a batch. It runs last, with the queues paused so that the workers take no CPU from
// the edges, and its reports are dropped afterwards: no other phase sees them.

export const BATCH_PATH = "/api/reports";
/** Reports per request. */
export const BATCH_SIZE = 100;
/** Distinct batches in the phase's file (each a line of BATCH_SIZE reports, ~40 KB). */
const BATCHES = 64;
/** A few connections saturate an edge that reads 40 KB a request. */
const BATCH_CONNECTIONS = 16;

export interface BatchPhase {
  /** Reports per request. */
  batchSize: number;
  /** Requests: wrk's count, statuses other than 200 from the edges' own counter. */
  load: LoadResult;
  /** Reports the edges durably enqueued during the phase (their own count). */
  reports: number;
  reportsPerSec: number;
  jobs: number;
  /** The highest peak RSS of the edges. */
  edgePeakRssMb: number;
  cpuCores: Record<string, number>;
  /**
   * With `store`: CPU seconds of every process (edges, Redis, workers, ClickHouse) from the start
   * of the load until ClickHouse held the phase's reports; null without.
   */
  cpuSecondsToStored: Record<string, number> | null;
  /** With `store`: whether ClickHouse held them all before the deadline. */
  stored: boolean | null;
}

export interface BatchPhaseOptions {
  keys: string[];
  /** Connections in all (at least one per edge). */
  connections?: number;
  durationS: number;
  warmupS: number;
  /** wrk unless told otherwise. */
  generator?: SaturatingGenerator;
  /** Store the reports with the stack's workers after the load (`phase`: the keys' phase name). */
  store?: { phase: string; timeoutS: number };
  /**
   * Other requests than batches of BATCH_SIZE on BATCH_PATH (phase 2c's OTLP exports): their
   * path, a fresh file of them (called once for the warm-up, once for the measured load), and
   * the reports each makes.
   */
  requests?: { path: string; files: () => LoadFiles; reportsEach: number };
}

export async function runBatchPhase(
  stack: Stack,
  edges: EdgeProc[],
  opts: BatchPhaseOptions,
  cleanup: Cleanup,
): Promise<BatchPhase> {
  const files =
    opts.requests?.files ??
    (() => writeBatchFiles(stack.dir, "batch", opts.keys, { batches: BATCHES, size: BATCH_SIZE }));
  const path = opts.requests?.path ?? BATCH_PATH;
  const spec = {
    urls: edges.map((e) => e.url),
    connections: Math.max(edges.length, opts.connections ?? BATCH_CONNECTIONS),
    mode: "saturate" as const,
    path,
    generator: opts.generator,
  };
  await stack.pauseQueues();
  // The batch route's own code is cold until now.
  await runLoad({ ...spec, ...files(), durationS: opts.warmupS }, cleanup);
  await settledEnqueued(edges, path);
  await stack.dropQueues();
  await stack.pauseQueues();

  const measured = files();
  const before = await settledEnqueued(edges, path);
  for (const e of edges) resetPeakRss(e.pid);
  const cpu = cpuMeter({
    ...Object.fromEntries(edges.map((e) => [e.name, e.pid])),
    ...stack.redisPids(),
    ...(opts.store
      ? {
          ...Object.fromEntries(stack.workers().map((w) => [w.name, w.pid])),
          clickhouse: stack.clickhouse.process.pid ?? 0,
        }
      : {}),
  });
  const load = await runLoad({ ...spec, ...measured, durationS: opts.durationS }, cleanup);
  const cpuCores = cpu.read().cores;
  const after = await settledEnqueued(edges, path);
  const edgePeakRssMb = Math.max(0, ...edges.map((e) => mb(peakRssBytes(e.pid))));
  const reports = after.reports - before.reports;
  let cpuSecondsToStored: Record<string, number> | null = null;
  let stored: boolean | null = null;
  if (opts.store) {
    await stack.resumeQueues();
    stored = (await waitStored(stack, opts.store.phase, reports, opts.store.timeoutS)).complete;
    cpuSecondsToStored = cpu.read().seconds;
  } else {
    await stack.dropQueues();
  }
  return {
    batchSize: opts.requests?.reportsEach ?? BATCH_SIZE,
    load: withEdgeStatuses(load, before, after),
    reports,
    reportsPerSec: load.durationS > 0 ? Math.round(reports / load.durationS) : 0,
    jobs: after.jobs - before.jobs,
    edgePeakRssMb,
    cpuCores,
    cpuSecondsToStored,
    stored,
  };
}
