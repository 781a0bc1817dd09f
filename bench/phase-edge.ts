import { mb } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadResult } from "./load-spec.js";
import { sleep } from "./poll.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import { metricSum } from "./prometheus.js";
import { runLoad } from "./run-load.js";
import { enqueuedReports, type ServiceProc, type Stack } from "./stack.js";

// Phase 2: the edge alone, no workers, saturated for the phase: what it accepts, how fast it
// answers, its peak memory, and what each queued report costs in Redis. The backlog it leaves is
// phase 3's work.

export interface EdgePhase {
  load: LoadResult;
  /** Reports the edge enqueued (its own count; includes answers the generator did not wait for). */
  enqueued: number;
  jobs: number;
  edgePeakRssMb: number;
  redisBytesPerReport: number;
  redisUsedMb: number;
  cpuCores: Record<string, number>;
}

/**
 * Waits until the edge's enqueued count stops moving (requests in flight at the end settle).
 * The count is what ClickHouse must end up holding, so a /metrics that cannot be read fails the
 * run rather than let it wait for a wrong number.
 */
export async function settledEnqueued(
  edge: ServiceProc,
): Promise<{ reports: number; jobs: number }> {
  let last = -1;
  let text = "";
  for (let i = 0; i < 40; i++) {
    text = await edge.metrics();
    const now = enqueuedReports(text);
    if (now === last) break;
    last = now;
    await sleep(250);
  }
  return { reports: last, jobs: metricSum(text, "headroom_reports_per_job_count") };
}

/** Unmeasured load on a fresh edge, then its reports are dropped from the queue. */
export async function warmUp(
  stack: Stack,
  edge: ServiceProc & { url: string },
  opts: { keys: string[]; connections: number; durationS: number },
  cleanup: Cleanup,
): Promise<void> {
  await runLoad({ url: edge.url, ...opts, mode: "saturate" }, cleanup);
  await settledEnqueued(edge);
  // obliterate pauses the queue on its way; the workers started later must find it running.
  await stack.queue.obliterate({ force: true });
  await stack.queue.resume();
}

export async function runEdgePhase(
  stack: Stack,
  edge: ServiceProc & { url: string },
  opts: { keys: string[]; connections: number; durationS: number },
  cleanup: Cleanup,
): Promise<EdgePhase> {
  const memBefore = await stack.redisUsedMemory();
  const before = await settledEnqueued(edge);
  resetPeakRss(edge.pid);
  const cpu = cpuMeter({
    edge: edge.pid,
    redis: stack.redisServer.process.pid ?? 0,
  });
  const load = await runLoad(
    {
      url: edge.url,
      keys: opts.keys,
      connections: opts.connections,
      durationS: opts.durationS,
      mode: "saturate",
    },
    cleanup,
  );
  const cpuCores = cpu.read();
  const after = await settledEnqueued(edge);
  const memAfter = await stack.redisUsedMemory();
  const enqueued = after.reports - before.reports;
  return {
    load,
    enqueued,
    jobs: after.jobs - before.jobs,
    edgePeakRssMb: mb(peakRssBytes(edge.pid)),
    redisBytesPerReport: Math.round((memAfter - memBefore) / Math.max(1, enqueued)),
    redisUsedMb: mb(memAfter),
    cpuCores,
  };
}
