import { mb } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import { type LoadResult, REPORT_PATH, type SaturatingGenerator } from "./load-spec.js";
import { sleep } from "./poll.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import { metricByLabel, metricSum } from "./prometheus.js";
import type { LoadFiles } from "./report-bodies.js";
import { runLoad } from "./run-load.js";
import { type EdgeProc, enqueuedReports, type ServiceProc, type Stack } from "./stack.js";

// Phase 2: the edge(s) alone, no workers, saturated for the phase: what they accept, how fast
// they answer, their peak memory, and what each queued report costs in Redis. The backlog they
// leave is phase 3's work.

export interface EdgePhase {
  load: LoadResult;
  /** Reports the edges enqueued (their own count; includes answers the generator did not wait for). */
  enqueued: number;
  jobs: number;
  /** The highest peak RSS of the edges. */
  edgePeakRssMb: number;
  /** Peak RSS of each edge, by name. */
  edgesPeakRssMb: Record<string, number>;
  redisBytesPerReport: number;
  redisUsedMb: number;
  cpuCores: Record<string, number>;
}

/** What the edges have done so far, from their own metrics, summed. */
export interface EdgeCounts {
  /** Reports durably enqueued. */
  reports: number;
  jobs: number;
  /** Answers on the report route by status. */
  statuses: Record<string, number>;
}

/**
 * Waits until the edges' enqueued count stops moving (requests in flight at the end settle).
 * The count is what ClickHouse must end up holding, so a /metrics that cannot be read fails the
 * run rather than let it wait for a wrong number.
 */
export async function settledEnqueued(
  edges: ServiceProc[],
  route = REPORT_PATH,
): Promise<EdgeCounts> {
  let last: EdgeCounts = { reports: -1, jobs: 0, statuses: {} };
  for (let i = 0; i < 40; i++) {
    const texts = await Promise.all(edges.map((e) => e.metrics()));
    const now = countsOf(texts, route);
    if (now.reports === last.reports) return now;
    last = now;
    await sleep(250);
  }
  return last;
}

export function countsOf(texts: string[], route = REPORT_PATH): EdgeCounts {
  const statuses: Record<string, number> = {};
  for (const text of texts) {
    const by = metricByLabel(text, "headroom_http_requests_total", "status", { route });
    for (const [status, n] of Object.entries(by)) statuses[status] = (statuses[status] ?? 0) + n;
  }
  return {
    reports: texts.reduce((a, t) => a + enqueuedReports(t), 0),
    jobs: texts.reduce((a, t) => a + metricSum(t, "headroom_reports_per_job_count"), 0),
    statuses,
  };
}

/**
 * The edges' answers other than 200 between two counts, by status. wrk counts failed answers
 * without their status: the edges' own count replaces its total where the edges have one.
 */
export function withEdgeStatuses(load: LoadResult, before: EdgeCounts, after: EdgeCounts) {
  const statuses: Record<string, number> = {};
  for (const [status, n] of Object.entries(after.statuses)) {
    const d = n - (before.statuses[status] ?? 0);
    if (status !== "200" && d > 0) statuses[status] = d;
  }
  if (load.mode === "saturate" && Object.keys(statuses).length > 0) load.statuses = statuses;
  return load;
}

type SaturateOptions = {
  files: LoadFiles;
  connections: number;
  durationS: number;
  /** wrk unless told otherwise. */
  generator?: SaturatingGenerator;
};

/** wrk (or autocannon) against every edge for the phase's duration. */
const saturate = (edges: EdgeProc[], opts: SaturateOptions, cleanup: Cleanup) =>
  runLoad(
    {
      urls: edges.map((e) => e.url),
      ...opts.files,
      connections: opts.connections,
      durationS: opts.durationS,
      mode: "saturate",
      generator: opts.generator,
    },
    cleanup,
  );

/** Unmeasured load on fresh edges, then their reports are dropped from the queue(s). */
export async function warmUp(
  stack: Stack,
  edges: EdgeProc[],
  opts: SaturateOptions,
  cleanup: Cleanup,
): Promise<void> {
  await saturate(edges, opts, cleanup);
  await settledEnqueued(edges);
  await stack.dropQueues();
}

export async function runEdgePhase(
  stack: Stack,
  edges: EdgeProc[],
  opts: SaturateOptions,
  cleanup: Cleanup,
): Promise<EdgePhase> {
  const memBefore = await stack.redisUsedMemory();
  const before = await settledEnqueued(edges);
  for (const e of edges) resetPeakRss(e.pid);
  const cpu = cpuMeter({
    ...Object.fromEntries(edges.map((e) => [e.name, e.pid])),
    ...stack.redisPids(),
  });
  const load = await saturate(edges, opts, cleanup);
  const cpuCores = cpu.read().cores;
  const after = await settledEnqueued(edges);
  const memAfter = await stack.redisUsedMemory();
  const enqueued = after.reports - before.reports;
  const edgesPeakRssMb = Object.fromEntries(edges.map((e) => [e.name, mb(peakRssBytes(e.pid))]));
  return {
    load: withEdgeStatuses(load, before, after),
    enqueued,
    jobs: after.jobs - before.jobs,
    edgePeakRssMb: Math.max(0, ...Object.values(edgesPeakRssMb)),
    edgesPeakRssMb,
    redisBytesPerReport: Math.round((memAfter - memBefore) / Math.max(1, enqueued)),
    redisUsedMb: mb(memAfter),
    cpuCores,
  };
}
