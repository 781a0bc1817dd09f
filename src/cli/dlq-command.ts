import { readFileSync } from "node:fs";
import type { Job, Queue } from "bullmq";
import { z } from "zod";
import { jobRowCount, jobRows } from "../queue/job-rows.js";
import { createReportsQueue, type ReportJobData } from "../queue/reports-queue.js";
import { knownShards, shardNames } from "../queue/shards.js";
import type { RedisClient } from "../redis/connections.js";
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
  /** BullMQ's key prefix of the shard's queue: `prefix:name`. */
  keyPrefix: string;
  queue: Queue<ReportJobData>;
}

function summary(shard: Shard, job: Job<ReportJobData>) {
  return {
    id: `${shard.ref}${job.id}`,
    rows: job.data ? jobRowCount(job.data) : 0,
    reason: job.failedReason,
    from_job: job.data?.dead?.from ?? null,
    failed_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

/** Every queue shard an edge has written to (src/queue/shards.ts): each has its failed set. */
async function withShards(
  run: (shards: Shard[], ctx: { redis: RedisClient; retentionDays: number }) => Promise<void>,
): Promise<void> {
  const config = cliConfig();
  const redis = await connectRedis(config);
  const base = { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME };
  const names = await knownShards(redis, base, shardNames(base, config.QUEUE_SHARDS));
  const shards = names.map((n) => ({
    ref: n.prefix === base.prefix ? "" : `${n.prefix}/`,
    keyPrefix: `${n.prefix}:${n.name}`,
    queue: createReportsQueue(redis, n),
  }));
  try {
    await run(shards, { redis, retentionDays: config.DLQ_RETENTION_DAYS });
  } finally {
    await Promise.all(shards.map((s) => s.queue.close()));
    await closeRedis(redis);
  }
}

// BullMQ's types split a job of a union data type into a union of jobs: one job type again.
type ReportJob = Job<ReportJobData>;

async function failedJobs(shards: Shard[]) {
  const all = await Promise.all(
    shards.map(async (shard) =>
      (await shard.queue.getFailed(0, -1)).map((job) => ({ shard, job: job as ReportJob })),
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
  return { shard, job: job as ReportJob };
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

/** What the dead-letter set and the manifests hold now, and when the oldest failed job goes. */
export const dlqStatus = (opts: { json: boolean }) =>
  withShards(async (shards, { redis, retentionDays }) => {
    const rows = await Promise.all(
      shards.map(async (shard) => {
        const [failed, oldest, owners] = await Promise.all([
          redis.zcard(`${shard.keyPrefix}:failed`),
          redis.zrange(`${shard.keyPrefix}:failed`, 0, 0, "WITHSCORES"),
          redis.hvals(`${shard.keyPrefix}:manifest-owners`),
        ]);
        const oldestAt = oldest[1] === undefined ? null : Number(oldest[1]);
        return {
          shard: shard.ref || "(base)",
          failed_jobs: failed,
          oldest_failed_at: oldestAt === null ? null : new Date(oldestAt).toISOString(),
          oldest_expires_at:
            oldestAt === null
              ? null
              : new Date(oldestAt + retentionDays * 86_400_000).toISOString(),
          manifest_jobs: owners.length,
          manifests: new Set(owners).size,
        };
      }),
    );
    print(opts.json, { retention_days: retentionDays, shards: rows }, () =>
      [
        `failed jobs are kept ${retentionDays} days (DLQ_RETENTION_DAYS), then removed with their manifests`,
        table(
          [
            "SHARD",
            "FAILED JOBS",
            "OLDEST FAILED AT",
            "IT EXPIRES AT",
            "MANIFESTS",
            "JOBS IN THEM",
          ],
          rows.map((r) => [
            r.shard,
            r.failed_jobs,
            r.oldest_failed_at,
            r.oldest_expires_at,
            r.manifests,
            r.manifest_jobs,
          ]),
        ),
      ].join("\n"),
    );
  });

export const dlqShow = (id: string) =>
  withShards(async (shards) => {
    const { shard, job } = await failedJob(shards, id);
    print(
      true,
      {
        ...summary(shard, job),
        reports: jobRows(job.data).map(fromRow),
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
      // may have landed already, long ago: the worker inserts only its rows that `reports` does
      // not hold yet (manifest-delivery.ts), never its whole first batch again.
      if (corrected && !job.data.dead) {
        throw new UsageError(
          `job ${shard.ref}${job.id} holds no refused rows: replay it without --rows (it goes in as it was)`,
        );
      }
      // Corrected rows are in this release's shape; a job goes again in the shape and the form
      // (flat or grouped rows) it was, without the dead-letter mark, and marked as a replay.
      const data: ReportJobData = corrected ? { v: ROW_SHAPES.current, rows: corrected } : job.data;
      const v = data.v ?? 1;
      await job.updateData(
        data.groups === undefined
          ? { v, rows: data.rows, replay: true }
          : { v, groups: data.groups, replay: true },
      );
      await job.retry("failed");
      process.stdout.write(`replayed ${shard.ref}${job.id} (${jobRowCount(data)} rows)\n`);
    }
  });
