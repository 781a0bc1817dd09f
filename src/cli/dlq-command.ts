import { readFileSync } from "node:fs";
import type { Job, Queue } from "bullmq";
import { z } from "zod";
import { createReportsQueue, type ReportJobData } from "../queue/reports-queue.js";
import { fromRow, reportRecordSchema, toRow } from "../report/report-schema.js";
import { cliConfig, print, table } from "./context.js";
import { UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom dlq …`. The dead-letter set is the failed set of the reports queue: jobs of rows
// ClickHouse refused, and jobs that failed for good (e.g. a worker killed twice while holding
// them). Arguments are parsed and checked in program.ts.

function summary(job: Job<ReportJobData>) {
  return {
    id: job.id,
    rows: job.data?.rows?.length ?? 0,
    reason: job.failedReason,
    from_job: job.data?.dead?.from ?? null,
    failed_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

async function withQueue(run: (queue: Queue<ReportJobData>) => Promise<void>): Promise<void> {
  const config = cliConfig();
  const redis = await connectRedis(config);
  const queue = createReportsQueue(redis, { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME });
  try {
    await run(queue);
  } finally {
    await queue.close();
    await closeRedis(redis);
  }
}

async function failedJob(queue: Queue<ReportJobData>, id: string): Promise<Job<ReportJobData>> {
  const job = await queue.getJob(id);
  if (!job || !(await job.isFailed())) throw new UsageError(`no failed job ${id}`);
  return job;
}

export const dlqList = (opts: { json: boolean }) =>
  withQueue(async (queue) => {
    const jobs = (await queue.getFailed(0, -1)).map(summary);
    print(opts.json, jobs, () =>
      jobs.length === 0
        ? "the dead-letter set is empty"
        : table(
            ["JOB ID", "ROWS", "FAILED AT", "REASON"],
            jobs.map((j) => [
              String(j.id),
              j.rows,
              j.failed_at,
              (j.reason ?? "").split("\n")[0]?.slice(0, 100) ?? "",
            ]),
          ),
    );
  });

export const dlqShow = (id: string) =>
  withQueue(async (queue) => {
    const job = await failedJob(queue, id);
    print(true, { ...summary(job), reports: job.data.rows.map(fromRow) }, () => "");
  });

/** Rows from a `--rows` file: a JSON array of corrected reports, as `show` prints them. */
function readRows(file: string) {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new UsageError(`--rows: ${(err as Error).message}`);
  }
  const parsed = z.array(reportRecordSchema).safeParse(json);
  if (!parsed.success) throw new UsageError(`--rows: ${z.prettifyError(parsed.error)}`);
  return parsed.data.map(toRow);
}

/** One job by id (optionally with corrected rows), or every failed job. */
export const dlqReplay = (target: { id: string; rows?: string } | { all: true }) =>
  withQueue(async (queue) => {
    const jobs =
      "all" in target ? await queue.getFailed(0, -1) : [await failedJob(queue, target.id)];
    const corrected = "rows" in target && target.rows ? readRows(target.rows) : undefined;
    for (const job of jobs) {
      // Corrected rows replace rows ClickHouse refused, which never landed. Any other failed job
      // may have landed already: it goes again as it was, so its batch is inserted byte for byte
      // (see batch-manifests.ts) and ClickHouse keeps one copy.
      if (corrected && !job.data.dead) {
        throw new UsageError(
          `job ${job.id} holds no refused rows: replay it without --rows (it goes in as it was)`,
        );
      }
      const rows = corrected ?? job.data.rows;
      // Without the dead-letter mark the job is ingested like any other.
      await job.updateData({ v: 1, rows });
      await job.retry("failed");
      process.stdout.write(`replayed ${job.id} (${rows.length} rows)\n`);
    }
  });
