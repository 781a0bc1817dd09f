import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// The worker's group commit (BATCH_MIN_WAIT_MS): under light load, with its insert slots free, a
// batch goes once it is BATCH_MIN_WAIT_MS old instead of waiting BATCH_MAX_WAIT_MS — here a
// minute, far past the deadline — and its jobs complete once ClickHouse holds their rows.

let p: Pipeline;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  p = await startPipeline({ BATCH_MAX_WAIT_MS: "60000", BATCH_MIN_WAIT_MS: "50" });
});

afterAll(async () => {
  await p?.close();
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
