import { type ClickHouseClient, createClient } from "@clickhouse/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// WORKER_MAX_ROWS_IN_HAND: a worker whose ClickHouse does not answer holds at most that many rows,
// however many jobs its concurrency allows: a job it has not read yet counts as
// ENQUEUE_MAX_REPORTS rows. The rest wait in the queue, and everything lands once ClickHouse
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
  });
  proxy = await startClickHouseProxy(p.clickhouse.url);
  proxied = createClient({ url: proxy.url, request_timeout: 30_000 });
});

afterAll(async () => {
  await proxied?.close();
  await proxy?.close();
  await p?.close();
});

it("holds 20 rows of jobs at most while ClickHouse's answers are held, then stores every job once", async () => {
  const project = `p-in-hand-${uniqueId()}`;
  let release = () => {};
  const answers = new Promise<void>((resolve) => {
    release = resolve;
  });
  proxy.setPolicy(({ kind }) =>
    kind === "insert" ? { action: "pass", beforeAnswer: () => answers } : "pass",
  );
  const worker = startIngestWorker(p, logger, { clickhouse: proxied });
  try {
    const JOBS = 12;
    const ids = await p.fill(JOBS, 5, project);
    // 20 rows are 4 jobs of 5 (the most a job may have): 4 active, and never a fifth.
    await eventually(async () => expect((await p.queue.getJobCounts("active")).active).toBe(4), {
      timeoutMs: 20_000,
    });
    const until = Date.now() + 3 * p.config.BATCH_MAX_WAIT_MS;
    do {
      const counts = await p.queue.getJobCounts("wait", "active", "completed", "failed");
      expect(counts).toStrictEqual({ wait: JOBS - 4, active: 4, completed: 0, failed: 0 });
      await new Promise((resolve) => setTimeout(resolve, 25));
    } while (Date.now() < until);

    release();
    await eventually(async () => expect(await p.jobCounts()).toStrictEqual(DRAINED), {
      timeoutMs: 20_000,
    });
    expect(await p.distinctCount(project)).toBe(ids.length);
    expect(await p.rawCount(project)).toBe(ids.length);
  } finally {
    release();
    await worker.close();
  }
});
