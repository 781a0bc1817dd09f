import type { Job } from "bullmq";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createEnqueuer, EnqueueError } from "../../src/queue/enqueuer.js";
import { REPORT_JOB, type ReportJobData } from "../../src/queue/reports-queue.js";
import type { ReportRow } from "../../src/report/report-schema.js";

// Micro-batching of concurrent enqueues into `addBulk` calls, against a fake queue that has only
// `addBulk` (the one method the enqueuer uses) and acknowledges each call when the test says so.

type BulkJob = { name: string; data: ReportJobData };

function fakeQueue() {
  const calls: { jobs: BulkJob[]; ack: () => void; fail: (err: Error) => void }[] = [];
  const queue = {
    addBulk(jobs: BulkJob[]): Promise<Job<ReportJobData, void, string>[]> {
      return new Promise((resolve, reject) => {
        calls.push({ jobs, ack: () => resolve([]), fail: reject });
      });
    },
  };
  /** Report ids per addBulk call, in call order. */
  const batches = () => calls.map((c) => c.jobs.flatMap((j) => j.data.rows.map((r) => r[0])));
  return { queue, calls, batches };
}

const row = (id: string): ReportRow => [id, "prj", "key", "default", "openai", null];

/** Tracks how a promise settled, so a test can check it has not yet. */
function track(p: Promise<void>) {
  const state = {
    settled: "pending" as "pending" | "resolved" | "rejected",
    error: undefined as unknown,
  };
  p.then(
    () => {
      state.settled = "resolved";
    },
    (err: unknown) => {
      state.settled = "rejected";
      state.error = err;
    },
  );
  return state;
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("enqueuer", () => {
  it("writes concurrent reports as one job in one addBulk when maxReports is reached", async () => {
    const { queue, calls, batches } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 3, maxWaitMs: 1_000 });
    const done = Promise.all(["a", "b", "c"].map((id) => enqueuer.enqueue(row(id))));
    expect(batches()).toEqual([["a", "b", "c"]]);
    expect(calls[0]?.jobs).toEqual([
      { name: REPORT_JOB, data: { v: 1, rows: [row("a"), row("b"), row("c")] } },
    ]);
    calls[0]?.ack();
    await done;
  });

  it("starts a new batch after maxReports; the rest waits for maxWaitMs", async () => {
    const { queue, calls, batches } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 2, maxWaitMs: 50 });
    const done = Promise.all(["a", "b", "c", "d", "e"].map((id) => enqueuer.enqueue(row(id))));
    expect(batches()).toEqual([
      ["a", "b"],
      ["c", "d"],
    ]);
    await vi.advanceTimersByTimeAsync(49);
    expect(calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches()[2]).toEqual(["e"]);
    for (const c of calls) c.ack();
    await done;
  });

  it("writes pending reports once maxWaitMs has passed since the first of them", async () => {
    const { queue, calls, batches } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 100, maxWaitMs: 20 });
    const early = [enqueuer.enqueue(row("a"))];
    await vi.advanceTimersByTimeAsync(15);
    early.push(enqueuer.enqueue(row("b")), enqueuer.enqueue(row("c")));
    await vi.advanceTimersByTimeAsync(4);
    expect(calls).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches()).toEqual([["a", "b", "c"]]);
    calls[0]?.ack();
    await Promise.all(early);
    // A report after that write waits its own maxWaitMs, not what was left of an earlier one.
    const late = enqueuer.enqueue(row("d"));
    await vi.advanceTimersByTimeAsync(19);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches()[1]).toEqual(["d"]);
    calls[1]?.ack();
    await late;
  });

  it("resolves each caller only after its addBulk resolved", async () => {
    const { queue, calls } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 2, maxWaitMs: 1_000 });
    const a = track(enqueuer.enqueue(row("a")));
    const b = track(enqueuer.enqueue(row("b")));
    const c = track(enqueuer.enqueue(row("c")));
    await vi.advanceTimersByTimeAsync(0);
    expect([a.settled, b.settled, c.settled]).toEqual(["pending", "pending", "pending"]);
    calls[0]?.ack();
    await vi.advanceTimersByTimeAsync(0);
    expect([a.settled, b.settled, c.settled]).toEqual(["resolved", "resolved", "pending"]);
  });

  it("rejects every caller of a failed addBulk with EnqueueError; later batches still work", async () => {
    const { queue, calls } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 2, maxWaitMs: 1_000 });
    const a = track(enqueuer.enqueue(row("a")));
    const b = track(enqueuer.enqueue(row("b")));
    const redisDown = new Error("Connection is closed.");
    calls[0]?.fail(redisDown);
    await vi.advanceTimersByTimeAsync(0);
    for (const s of [a, b]) {
      expect(s.settled).toBe("rejected");
      expect(s.error).toBeInstanceOf(EnqueueError);
      expect((s.error as EnqueueError).cause).toBe(redisDown);
    }
    const c = enqueuer.enqueue(row("c"));
    const d = enqueuer.enqueue(row("d"));
    calls[1]?.ack();
    await expect(Promise.all([c, d])).resolves.toBeDefined();
  });

  it("drain writes what is pending at once and waits for every write under way", async () => {
    const { queue, calls, batches } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 2, maxWaitMs: 60_000 });
    void enqueuer.enqueue(row("a"));
    void enqueuer.enqueue(row("b"));
    void enqueuer.enqueue(row("c"));
    const drained = track(enqueuer.drain());
    expect(batches()).toEqual([["a", "b"], ["c"]]);
    calls[1]?.ack();
    await vi.advanceTimersByTimeAsync(0);
    expect(drained.settled).toBe("pending");
    calls[0]?.ack();
    await vi.advanceTimersByTimeAsync(0);
    expect(drained.settled).toBe("resolved");
  });

  it("drain resolves at once with nothing pending, and does not reject on a failed write", async () => {
    const { queue, calls } = fakeQueue();
    const enqueuer = createEnqueuer({ queue, maxReports: 10, maxWaitMs: 60_000 });
    await enqueuer.drain();
    const lost = track(enqueuer.enqueue(row("a")));
    const drained = enqueuer.drain();
    calls[0]?.fail(new Error("READONLY"));
    await drained;
    expect(lost.settled).toBe("rejected");
  });

  it("reports each write to onFlush: reports, seconds and outcome", async () => {
    const { queue, calls } = fakeQueue();
    const flushes: [number, number, boolean][] = [];
    const enqueuer = createEnqueuer({
      queue,
      maxReports: 3,
      maxWaitMs: 10,
      onFlush: (reports, seconds, ok) => flushes.push([reports, seconds, ok]),
    });
    const ok = Promise.all(["a", "b", "c"].map((id) => enqueuer.enqueue(row(id))));
    calls[0]?.ack();
    await ok;
    const failed = enqueuer.enqueue(row("d")).catch(() => {});
    await vi.advanceTimersByTimeAsync(10);
    calls[1]?.fail(new Error("down"));
    await failed;
    expect(flushes.map(([reports, , good]) => [reports, good])).toEqual([
      [3, true],
      [1, false],
    ]);
    for (const [, seconds] of flushes) expect(seconds).toBeGreaterThanOrEqual(0);
  });
});
