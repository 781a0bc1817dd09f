import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { Job } from "bullmq";
import { z } from "zod";
import { createReportsQueue, type ReportJobData } from "../queue/reports-queue.js";
import { createWorkerRedis } from "../redis/connections.js";
import { fromRow, reportRecordSchema, toRow } from "../report/report-schema.js";
import { cliConfig, print, table, UsageError } from "./context.js";

// The dead-letter set is the failed set of the reports queue: jobs of rows ClickHouse refused,
// and jobs that failed for good (e.g. a worker killed twice while holding them).

export const DLQ_HELP = `headroom dlq list [--json]
headroom dlq show JOB_ID
headroom dlq replay JOB_ID [--rows FILE]   (FILE: a JSON array of corrected reports, as 'show' prints them)
headroom dlq replay --all`;

function summary(job: Job<ReportJobData>) {
  return {
    id: job.id,
    rows: job.data?.rows?.length ?? 0,
    reason: job.failedReason,
    from_job: job.data?.dead?.from ?? null,
    failed_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

export async function dlqCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      json: { type: "boolean", default: false },
      rows: { type: "string" },
      all: { type: "boolean", default: false },
    },
  });
  const config = cliConfig();
  const redis = createWorkerRedis(config.REDIS_URL);
  const queue = createReportsQueue(redis, { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME });
  const get = async (id: string | undefined) => {
    if (!id) throw new UsageError(DLQ_HELP);
    const job = await queue.getJob(id);
    if (!job || !(await job.isFailed())) throw new UsageError(`no failed job ${id}`);
    return job;
  };
  try {
    switch (sub) {
      case "list": {
        const jobs = (await queue.getFailed(0, -1)).map(summary);
        print(values.json, jobs, () =>
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
        return;
      }
      case "show": {
        const job = await get(positionals[0]);
        const out = { ...summary(job), reports: job.data.rows.map(fromRow) };
        print(true, out, () => "");
        return;
      }
      case "replay": {
        const jobs = values.all ? await queue.getFailed(0, -1) : [await get(positionals[0])];
        if (values.rows && jobs.length !== 1) throw new UsageError("--rows replays one job");
        for (const job of jobs) {
          let rows = job.data.rows;
          if (values.rows) {
            const parsed = z
              .array(reportRecordSchema)
              .safeParse(JSON.parse(readFileSync(values.rows, "utf8")));
            if (!parsed.success) throw new UsageError(`--rows: ${z.prettifyError(parsed.error)}`);
            rows = parsed.data.map(toRow);
          }
          // Without the dead-letter mark the job is ingested like any other; rows that landed
          // earlier are found stored and not inserted twice.
          await job.updateData({ v: 1, rows });
          await job.retry("failed");
          process.stdout.write(`replayed ${job.id} (${rows.length} rows)\n`);
        }
        return;
      }
      default:
        throw new UsageError(DLQ_HELP);
    }
  } finally {
    await queue.close();
    await redis.quit().catch(() => redis.disconnect());
  }
}
