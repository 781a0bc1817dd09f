import { readFileSync } from "node:fs";
import type { Job, Queue } from "bullmq";
import { z } from "zod";
import { createReportsQueue, type ReportJobData } from "../queue/reports-queue.js";
import { knownShards, shardNames } from "../queue/shards.js";
import { fromRow, reportRecordSchema, toRow } from "../report/report-schema.js";
import { ROW_SHAPES } from "../report/row-shapes.js";
import { cliConfig, print, table } from "./context.js";
import { UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom dlq …`. The dead-letter set is the failed set of the reports queue: jobs of rows
// ClickHouse refused, and jobs that failed for good (e.g. a worker killed twice while holding
// them). Arguments are parsed and checked in program.ts.

interface Shard {
  /** Empty for the base queue; `<prefix>/` before the job ids of other shards. */
  ref: string;
  queue: Queue<ReportJobData>;
}

function summary(shard: Shard, job: Job<ReportJobData>) {
  return {
    id: `${shard.ref}${job.id}`,
    rows: job.data?.rows?.length ?? 0,
    reason: job.failedReason,
    from_job: job.data?.dead?.from ?? null,
    failed_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

/** Every queue shard an edge has written to (src/queue/shards.ts): each has its failed set. */
async function withShards(run: (shards: Shard[]) => Promise<void>): Promise<void> {
  const config = cliConfig();
  const redis = await connectRedis(config);
  const base = { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME };
  const names = await knownShards(redis, base, shardNames(base, config.QUEUE_SHARDS));
  const shards = names.map((n) => ({
    ref: n.prefix === base.prefix ? "" : `${n.prefix}/`,
    queue: createReportsQueue(redis, n),
  }));
  try {
    await run(shards);
  } finally {
    await Promise.all(shards.map((s) => s.queue.close()));
    await closeRedis(redis);
  }
}

async function failedJobs(shards: Shard[]) {
  const all = await Promise.all(
    shards.map(async (shard) =>
      (await shard.queue.getFailed(0, -1)).map((job) => ({ shard, job })),
    ),
  );
  return all.flat();
}

/** A job by the id `dlq list` shows: `<id>` in the base queue, `<shard prefix>/<id>` in others. */
async function failedJob(shards: Shard[], id: string) {
  const slash = id.lastIndexOf("/");
  const ref = slash === -1 ? "" : id.slice(0, slash + 1);
  const shard = shards.find((s) => s.ref === ref);
  const job = await shard?.queue.getJob(id.slice(slash + 1));
  if (!shard || !job || !(await job.isFailed())) throw new UsageError(`no failed job ${id}`);
  return { shard, job };
}

export const dlqList = (opts: { json: boolean }) =>
  withShards(async (shards) => {
    const jobs = (await failedJobs(shards)).map(({ shard, job }) => summary(shard, job));
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
  withShards(async (shards) => {
    const { shard, job } = await failedJob(shards, id);
    print(
      true,
      {
        ...summary(shard, job),
        reports: ROW_SHAPES.upgrade(job.data.v, job.data.rows).map(fromRow),
      },
      () => "",
    );
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
  withShards(async (shards) => {
    const jobs = "all" in target ? await failedJobs(shards) : [await failedJob(shards, target.id)];
    const corrected = "rows" in target && target.rows ? readRows(target.rows) : undefined;
    for (const { shard, job } of jobs) {
      // Corrected rows replace rows ClickHouse refused, which never landed. Any other failed job
      // may have landed already: it goes again as it was, so its batch is inserted byte for byte
      // (see manifest-store.ts) and ClickHouse keeps one copy.
      if (corrected && !job.data.dead) {
        throw new UsageError(
          `job ${shard.ref}${job.id} holds no refused rows: replay it without --rows (it goes in as it was)`,
        );
      }
      // Corrected rows are in this release's shape; a job goes again in the shape it was.
      const data = corrected ? { v: ROW_SHAPES.current, rows: corrected } : job.data;
      const rows = data.rows;
      // Without the dead-letter mark the job is ingested like any other.
      await job.updateData({ v: data.v ?? 1, rows });
      await job.retry("failed");
      process.stdout.write(`replayed ${shard.ref}${job.id} (${rows.length} rows)\n`);
    }
  });
