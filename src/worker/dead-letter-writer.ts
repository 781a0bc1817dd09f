import { createHash } from "node:crypto";
import type { Job } from "bullmq";
import { REPORT_JOB, type ReportJobData, type ReportsQueue } from "../queue/reports-queue.js";
import { type ReportRow, reportIdOf } from "../report/report-schema.js";

/**
 * Rows ClickHouse refused for their data become a dead-letter job of their own on the reports
 * queue: it fails at once with its reason and waits in the failed set, to be inspected and
 * replayed (`headroom dlq`). Its rows are in this release's row shape, `rowShape`.
 */
export function createDeadLetterWriter(queue: ReportsQueue, rowShape: number) {
  return async (job: Job<ReportJobData>, rows: ReportRow[], reason: string): Promise<void> => {
    // A deterministic id: a redelivered job dead-letters the same rows only once.
    const digest = createHash("sha256")
      .update(rows.map(reportIdOf).join(","))
      .digest("hex")
      .slice(0, 16);
    await queue.add(
      REPORT_JOB,
      { v: rowShape, rows, dead: { reason, from: String(job.id) } },
      { jobId: `dead-${job.id}-${digest}`, attempts: 1 },
    );
  };
}
