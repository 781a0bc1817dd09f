import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { EnqueueError } from "../../src/queue/enqueue-error.js";
import { createIdJobs, type IdJobs, idJobId } from "../../src/queue/id-jobs.js";
import { createJobWriter, type WriteJob } from "../../src/queue/job-writer.js";
import { createReportsQueue, type ReportsQueue } from "../../src/queue/reports-queue.js";
import { uniqueId } from "../helpers/edge-fixture.js";

// The settle step of an unknown claim (id-jobs.ts), on a real Redis and BullMQ queue: whether a
// request's job with ids was written is read from BullMQ's answer to a "void" job under the same
// deduplication id, and the answer is final. A job written before the question is "written" and
// nothing is added; one not written is "not written", and its late write is refused. (The edge's
// whole write path with cuts is batch.write-outcome's, which takes minutes.)

let redis: Redis;
let queue: ReportsQueue;
let idJobs: IdJobs;
let writeJob: WriteJob;

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: null });
  const names = [{ prefix: `{t-id-jobs-${uniqueId()}}`, name: "reports" }];
  queue = createReportsQueue(redis, names[0] as (typeof names)[0]);
  const shared = { redis, names, queues: [queue], ackReplicas: 0, ackTimeoutMs: 1_000 };
  idJobs = createIdJobs(shared);
  writeJob = createJobWriter(shared);
});

afterAll(async () => {
  await queue?.close();
  redis?.disconnect();
});

/** A job place of its own, on the one shard. */
const place = () => {
  const p = idJobs.place();
  expect(p.shard).toBe(0);
  return p;
};

/** The ids of the queue's waiting jobs of `token` (its job, its void job). */
const jobsOf = async (token: string) =>
  (await queue.getWaiting())
    .map((j) => j.id)
    .filter((id) => id?.includes(token))
    .sort();

describe("whether a job with ids was written", () => {
  it("is true for a job written before the question, and adds nothing", async () => {
    const p = place();
    await writeJob(p.shard, [sampleRow(1, "p-id-jobs")], p.token);
    expect(await idJobs.written(p)).toBe(true);
    expect(await idJobs.written(p)).toBe(true);
    expect(await jobsOf(p.token)).toEqual([idJobId(p.token)]);
  });

  it("is false for a job not written, and stays false: its late write is refused", async () => {
    const p = place();
    expect(await idJobs.written(p)).toBe(false);
    // The job's own write, arriving late (a command that timed out may yet run).
    const late = await writeJob(p.shard, [sampleRow(2, "p-id-jobs")], p.token).catch((e) => e);
    expect(late).toBeInstanceOf(EnqueueError);
    expect((late as EnqueueError).mayBeStored).toBe(false);
    expect(await idJobs.written(p)).toBe(false);
    const [only, ...more] = await jobsOf(p.token);
    expect(more).toEqual([]);
    expect(only).not.toBe(idJobId(p.token));
    expect((await queue.getJob(only as string))?.data).toMatchObject({ rows: [] });
  });
});
