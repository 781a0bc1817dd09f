import { type ClickHouseClient, createClient } from "@clickhouse/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// WORKER_MAX_ROWS_IN_HAND: a worker whose ClickHouse does not answer holds at most that many rows,
// however many jobs its concurrency allows: a job it has not read yet counts as the most an edge
// puts in one (here 5). Small jobs let it take more, up to the bound, without the stall watchdog
// taking the wait for a stall. The rest wait in the queue, and everything lands once ClickHouse
// answers.

let p: Pipeline;
let proxy: ClickHouseProxy;
let proxied: ClickHouseClient;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  p = await startPipeline({
    BATCH_MAX_WAIT_MS: "500",
    WORKER_MAX_ROWS_IN_HAND: "20",
    ENQUEUE_MAX_REPORTS: "5",
    BATCH_MAX_REPORTS: "5",
  });
  proxy = await startClickHouseProxy(p.clickhouse.url);
  proxied = createClient({ url: proxy.url, request_timeout: 30_000 });
});

afterAll(async () => {
  await proxied?.close();
  await proxy?.close();
  await p?.close();
});

/** Inserts run, their answers wait for `release`. */
function holdAnswers() {
  let release = () => {};
  const answers = new Promise<void>((resolve) => {
    release = resolve;
  });
  proxy.setPolicy(({ kind }) =>
    kind === "insert" ? { action: "pass", beforeAnswer: () => answers } : "pass",
  );
  return () => release();
}

async function heldAtMost(active: number, jobs: number) {
  await eventually(async () => expect((await p.queue.getJobCounts("active")).active).toBe(active), {
    timeoutMs: 20_000,
  });
  // Past the stall watchdog's 2 s: nothing more is taken, nothing completes.
  const until = Date.now() + 3_000;
  do {
    const counts = await p.queue.getJobCounts("wait", "active", "completed", "failed");
    expect(counts.active).toBeLessThanOrEqual(active);
    expect([counts.completed, counts.failed]).toStrictEqual([0, 0]);
    // A lock lost on a loaded machine puts a job back in wait: still held by nobody else.
    expect((counts.wait ?? 0) + (counts.active ?? 0)).toBe(jobs);
    await new Promise((resolve) => setTimeout(resolve, 25));
  } while (Date.now() < until);
}

async function landsOnce(project: string, ids: string[]) {
  await eventually(async () => expect(await p.jobCounts()).toStrictEqual(DRAINED), {
    timeoutMs: 20_000,
  });
  expect(await p.distinctCount(project)).toBe(ids.length);
  expect(await p.rawCount(project)).toBe(ids.length);
}

it("holds 20 rows of 5-report jobs at most while ClickHouse's answers are held: 4 jobs, never a fifth", async () => {
  const project = `p-in-hand-${uniqueId()}`;
  const release = holdAnswers();
  const worker = startIngestWorker(p, logger, { clickhouse: proxied });
  try {
    const ids = await p.fill(12, 5, project);
    await heldAtMost(4, 12);
    release();
    await landsOnce(project, ids);
  } finally {
    release();
    await worker.close();
  }
});

it("takes more jobs as it reads how small they are, up to the bound, and no stall is seen in the wait", async () => {
  const project = `p-in-hand-small-${uniqueId()}`;
  const release = holdAnswers();
  const worker = startIngestWorker(p, logger, { clickhouse: proxied });
  try {
    // One report a job: 16 in hand leaves room for no 5-report job (16 + 5 > 20).
    const ids = await p.fill(30, 1, project);
    await heldAtMost(16, 30);
    expect(worker.watchdog.recoveries()).toBe(0);
    release();
    await landsOnce(project, ids);
  } finally {
    release();
    await worker.close();
  }
});
