import { type ClickHouseClient, createClient } from "@clickhouse/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// A job completes only after ClickHouse acknowledged the insert that holds its reports. Here the
// worker's ClickHouse is behind a proxy that lets the inserts run and holds their answers: the
// rows are in the table, the worker does not know it yet, and every job must still be active in
// BullMQ until the answers go back.

let p: Pipeline;
let proxy: ClickHouseProxy;
let proxied: ClickHouseClient;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  // Jobs added together make one batch (two at most: the worker has two insert slots).
  p = await startPipeline({ BATCH_MAX_WAIT_MS: "500" });
  proxy = await startClickHouseProxy(p.clickhouse.url);
  proxied = createClient({ url: proxy.url, request_timeout: 30_000 });
});

afterAll(async () => {
  await proxied?.close();
  await proxy?.close();
  await p?.close();
});

it("keeps every job active while ClickHouse's answer to its insert is held, then completes them", async () => {
  const project = `p-ack-${uniqueId()}`;
  let release = () => {};
  const answers = new Promise<void>((resolve) => {
    release = resolve;
  });
  let held = 0;
  proxy.setPolicy(({ kind }) =>
    kind === "insert"
      ? {
          action: "pass",
          beforeAnswer: async () => {
            held += 1;
            await answers;
          },
        }
      : "pass",
  );
  const worker = startIngestWorker(p, logger, { clickhouse: proxied });
  try {
    const JOBS = 6;
    const ids = await p.fill(JOBS, 5, project);
    // Every row is in ClickHouse: each batch's insert ran, and its answer is held.
    await eventually(async () => expect(await p.distinctCount(project)).toBe(ids.length), {
      timeoutMs: 20_000,
    });
    expect(held).toBeGreaterThan(0);
    // For a few of the worker's batch ages, no job completes (completed jobs are removed).
    const until = Date.now() + 3 * p.config.BATCH_MAX_WAIT_MS;
    do {
      const counts = await p.queue.getJobCounts("wait", "active", "completed", "failed");
      expect(counts).toStrictEqual({ wait: 0, active: JOBS, completed: 0, failed: 0 });
      await new Promise((resolve) => setTimeout(resolve, 25));
    } while (Date.now() < until);

    release();
    await eventually(async () => expect(await p.jobCounts()).toStrictEqual(DRAINED), {
      timeoutMs: 20_000,
    });
    expect(await p.rawCount(project)).toBe(ids.length);
  } finally {
    release();
    await worker.close();
  }
});
