import { type ConnectionOptions, Queue } from "bullmq";
import type { ReportRow } from "../report/report-schema.js";

// The queue between edge and workers. A job carries many reports as positional rows
// (REPORT_COLUMNS order): about half the Redis bytes of objects, and ready for JSONCompactEachRow.
// `v` names the rows' shape (src/report/row-shapes.ts), so a worker reads jobs an older edge
// queued. The rows are flat, or grouped by the columns a batch's rows share (job-rows.ts).

export const REPORT_JOB = "reports";

/** Rows that share GROUP_COLUMNS (job-rows.ts): their values once, each row without them. */
export interface RowGroup {
  shared: ReportRow;
  rows: ReportRow[];
}

interface JobFields {
  /** The rows' shape (src/report/row-shapes.ts): workers map older shapes to theirs. */
  v: number;
  /** Set on a job of rows that ClickHouse refused: it fails at once and waits in the DLQ. */
  dead?: { reason: string; from: string };
  /**
   * Put back by `dlq replay`: only its rows not yet in `reports` are inserted, under a token of
   * their own, whatever became of the batch it was first part of.
   */
  replay?: true;
}

export interface FlatJobData extends JobFields {
  rows: ReportRow[];
  groups?: undefined;
}

export interface GroupedJobData extends JobFields {
  groups: RowGroup[];
  rows?: undefined;
}

export type ReportJobData = FlatJobData | GroupedJobData;

export interface QueueNames {
  prefix: string;
  name: string;
}

/** The queue of report jobs (one per shard). */
export type ReportsQueue = Queue<ReportJobData, void, string>;

export function createReportsQueue(connection: ConnectionOptions, names: QueueNames): ReportsQueue {
  return new Queue<ReportJobData, void, string>(names.name, {
    connection,
    prefix: names.prefix,
    defaultJobOptions: {
      // Completed jobs are in ClickHouse; failed jobs are the dead-letter set and are kept.
      removeOnComplete: true,
      removeOnFail: false,
      attempts: 8,
      backoff: { type: "exponential", delay: 1_000 },
    },
  });
}
