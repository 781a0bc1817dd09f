import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Proc, readyWorker, startProcess } from "../../fixtures/processes.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startPipeline } from "../helpers/pipeline.js";

// Independent scaling: three worker processes compete for one queue against one ClickHouse.

let p: Pipeline;
const procs: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline({ BATCH_MAX_ROWS: "500", WORKER_CONCURRENCY: "8" });
});

afterAll(async () => {
  for (const w of procs) w.signal("SIGKILL");
  await Promise.all(procs.map((w) => w.exited));
  await p?.close();
});

describe("three worker processes", () => {
  it("drain one queue, and every report lands exactly once in the analyst views", async () => {
    // All three are ready before the first job exists, so none can drain the queue alone
    // before the others start; 300 jobs for 3 × 8 slots.
    for (let i = 0; i < 3; i++) procs.push(startProcess("workers/ingest.ts", p.env));
    const workers = await Promise.all(procs.map((proc) => readyWorker(proc)));
    const ids = await p.fill(300, 20);

    await eventually(
      async () => {
        expect(await p.distinctCount()).toBe(ids.length);
        expect(await p.jobCounts()).toStrictEqual(DRAINED);
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(await p.rawCount()).toBe(ids.length);
    expect(await p.rollupCount()).toBe(ids.length);

    // Each of the three took part: its own metrics count rows it had ClickHouse acknowledge
    // (a redelivered batch may count twice there; ClickHouse stored it once, checked above).
    const inserted = await Promise.all(workers.map((w) => w.inserted()));
    for (const n of inserted) expect(n).toBeGreaterThan(0);
    expect(inserted.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(ids.length);
    await Promise.all(
      procs.map(async (w) => {
        w.signal("SIGTERM");
        expect((await w.exited).code).toBe(0);
      }),
    );
  });
});
