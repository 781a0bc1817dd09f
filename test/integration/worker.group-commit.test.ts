import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// The worker's group commit (BATCH_MIN_WAIT_MS): under light load, with its insert slots free, a
// batch goes once it is BATCH_MIN_WAIT_MS old instead of waiting BATCH_MAX_WAIT_MS — here a
// minute, far past the deadline — and its jobs complete once ClickHouse holds their rows. A steady
// flow goes early only once per BATCH_MIN_INTERVAL_MS: each insert has a fixed cost in ClickHouse.

let p: Pipeline;
let steady: Pipeline;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  [p, steady] = await Promise.all([
    startPipeline({
      BATCH_MAX_WAIT_MS: "60000",
      BATCH_MIN_WAIT_MS: "50",
      BATCH_MIN_INTERVAL_MS: "0",
    }),
    startPipeline({
      BATCH_MAX_WAIT_MS: "60000",
      BATCH_MIN_WAIT_MS: "50",
      BATCH_MIN_INTERVAL_MS: "3000",
    }),
  ]);
});

afterAll(async () => {
  await Promise.all([p?.close(), steady?.close()]);
});

it("inserts a light load's batch once it is BATCH_MIN_WAIT_MS old, not BATCH_MAX_WAIT_MS", async () => {
  const project = `p-group-${uniqueId()}`;
  const metrics = createWorkerMetrics();
  const worker = startIngestWorker(p, logger, { metrics });
  try {
    const ids = await p.fill(3, 4, project);
    await eventually(
      async () => {
        expect(await p.distinctCount(project)).toBe(ids.length);
        expect(await p.jobCounts()).toStrictEqual(DRAINED);
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    expect(await p.rawCount(project)).toBe(ids.length);
    const closed = (await metrics.batchesClosed.get()).values;
    expect(closed.every((v) => v.labels.reason === "idle")).toBe(true);
  } finally {
    await worker.close();
  }
});

it("inserts a steady flow early only once per BATCH_MIN_INTERVAL_MS, every report once", async () => {
  const project = `p-steady-${uniqueId()}`;
  const metrics = createWorkerMetrics();
  const worker = startIngestWorker(steady, logger, { metrics });
  try {
    const started = performance.now();
    const ids: string[] = [];
    // A job every ~100 ms for 3.5 s: without the interval, a batch every 50 ms.
    while (performance.now() - started < 3_500) {
      ids.push(...(await steady.fill(1, 2, project)));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await eventually(
      async () => {
        expect(await steady.distinctCount(project)).toBe(ids.length);
        expect(await steady.jobCounts()).toStrictEqual(DRAINED);
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    const elapsedMs = performance.now() - started;
    expect(await steady.rawCount(project)).toBe(ids.length);
    const closed = (await metrics.batchesClosed.get()).values;
    const batches = closed.reduce((n, v) => n + v.value, 0);
    // One at once, then one per 3 s at most (a slower machine makes fewer, never more).
    expect(batches).toBeGreaterThanOrEqual(2);
    expect(batches).toBeLessThanOrEqual(1 + Math.floor(elapsedMs / 3_000));
    expect(closed.every((v) => v.labels.reason === "idle")).toBe(true);
  } finally {
    await worker.close();
  }
});
