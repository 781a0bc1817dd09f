import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { type Proc, startProcess } from "../helpers/processes.js";

// Independent scaling: three worker processes compete for one queue against one ClickHouse.

let p: Pipeline;
const workers: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline({ BATCH_MAX_ROWS: "500", WORKER_CONCURRENCY: "8" });
});

afterAll(async () => {
  for (const w of workers) w.signal("SIGKILL");
  await p?.close();
});

describe("three worker processes", () => {
  it("drain one queue, and every report lands exactly once in the analyst views", async () => {
    const ids = await p.fill(300, 20);
    for (let i = 0; i < 3; i++) workers.push(startProcess("workers/ingest.ts", p.env));
    await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));

    await eventually(async () => expect(await p.distinctCount()).toBe(ids.length), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    expect(await p.rawCount()).toBe(ids.length);
    expect(await p.rollupCount()).toBe(ids.length);
    const counts = await p.queue.getJobCounts("wait", "active", "failed", "delayed");
    expect(counts).toEqual({ wait: 0, active: 0, failed: 0, delayed: 0 });

    // Each of the three took part.
    const batches = workers.map((w) => w.output());
    for (const out of batches) expect(out).toMatch(/worker ready/);
    await Promise.all(
      workers.map(async (w) => {
        w.signal("SIGTERM");
        expect((await w.exited).code).toBe(0);
      }),
    );
  });
});
