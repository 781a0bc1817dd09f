import type { ReportsQueue } from "../queue/reports-queue.js";
import type { WorkerMetrics } from "./metrics.js";

/** Jobs removed per sweep at most: bounded work; the rest go at the next sweeps. */
const EXPIRE_PER_SWEEP = 1_000;

/**
 * The failed set (the dead-letter set) is kept `retentionMs` after each job failed, then the
 * job goes; the manifest sweep then releases its manifest. Counts both for /metrics.
 */
export async function expireFailedJobs(
  queue: Pick<ReportsQueue, "clean" | "getFailedCount">,
  retentionMs: number,
  metrics: Pick<WorkerMetrics, "failedJobs" | "failedJobsExpired">,
): Promise<number> {
  const removed = await queue.clean(retentionMs, EXPIRE_PER_SWEEP, "failed");
  metrics.failedJobsExpired.inc(removed.length);
  metrics.failedJobs.set(await queue.getFailedCount());
  return removed.length;
}
