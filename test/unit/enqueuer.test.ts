import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EnqueueError } from "../../src/queue/enqueue-error.js";
import { createEnqueuer } from "../../src/queue/enqueuer.js";
import type { ReportRow } from "../../src/report/report-schema.js";

// Group commit of concurrent enqueues into jobs, against a fake writer that acknowledges each
// job when the test says so.

function fakeWriter() {
  const calls: { shard: number; rows: ReportRow[]; ack: () => void; fail: (e: Error) => void }[] =
    [];
  const write = (shard: number, rows: ReportRow[]) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ shard, rows, ack: resolve, fail: reject });
    });
  /** Report ids per job, in write order. */
  const jobs = () => calls.map((c) => c.rows.map((r) => r[0]));
  return { write, calls, jobs };
}

const row = (id: string): ReportRow => [id, "prj", "key", "default", "openai", null];
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
/** Lets immediates, timers due now and promise callbacks run. */
const turn = () => vi.advanceTimersByTimeAsync(0);

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

const options = { shards: 1, maxReports: 500, lingerMs: 0 };

describe("enqueuer (group commit)", () => {
  it("writes a lone report at once, with the reports of the same event-loop turn", async () => {
    const { write, jobs } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, write });
    void enqueuer.enqueue(row("a"));
    void enqueuer.enqueue(row("b"));
    expect(jobs()).toEqual([]);
    await turn();
    expect(jobs()).toEqual([["a", "b"]]);
  });

  it("gathers what arrives during a write into the next job, sent when the write is acknowledged", async () => {
    const { write, calls, jobs } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, write });
    void enqueuer.enqueue(row("a"));
    await turn();
    for (const id of ids("b", 40)) void enqueuer.enqueue(row(id));
    await vi.advanceTimersByTimeAsync(1_000);
    // However long the first write takes, the others wait for it: one job in flight.
    expect(jobs()).toEqual([["a"]]);
    calls[0]?.ack();
    await turn();
    expect(jobs()).toEqual([["a"], ids("b", 40)]);
    // Under more load the jobs grow by themselves.
    for (const id of ids("c", 300)) void enqueuer.enqueue(row(id));
    calls[1]?.ack();
    await turn();
    expect(jobs()[2]).toEqual(ids("c", 300));
  });

  it("sends a full job at once, even while another is being written", async () => {
    const { write, jobs } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, maxReports: 3, write });
    void enqueuer.enqueue(row("a"));
    await turn();
    for (const id of ["b", "c", "d", "e"]) void enqueuer.enqueue(row(id));
    expect(jobs()).toEqual([["a"], ["b", "c", "d"]]);
  });

  it("keeps one job in flight per shard, spreading jobs over the shards", async () => {
    const { write, calls } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, shards: 3, write });
    for (const id of ["a", "b", "c", "d"]) {
      void enqueuer.enqueue(row(id));
      await turn();
    }
    expect(calls.map((c) => [c.shard, c.rows.map((r) => r[0])])).toEqual([
      [0, ["a"]],
      [1, ["b"]],
      [2, ["c"]],
    ]);
    calls[1]?.ack();
    await turn();
    expect(calls[3]).toMatchObject({ shard: 1, rows: [row("d")] });
  });

  it("with lingerMs, waits that long for company when no job is being written", async () => {
    const { write, jobs } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, lingerMs: 20, write });
    void enqueuer.enqueue(row("a"));
    await vi.advanceTimersByTimeAsync(15);
    void enqueuer.enqueue(row("b"));
    await vi.advanceTimersByTimeAsync(4);
    expect(jobs()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(jobs()).toEqual([["a", "b"]]);
  });

  it("resolves each caller only after the job holding its report was acknowledged", async () => {
    const { write, calls } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, write });
    const a = track(enqueuer.enqueue(row("a")));
    await turn();
    const b = track(enqueuer.enqueue(row("b")));
    await turn();
    expect([a.settled, b.settled]).toEqual(["pending", "pending"]);
    calls[0]?.ack();
    await turn();
    expect([a.settled, b.settled]).toEqual(["resolved", "pending"]);
    calls[1]?.ack();
    await turn();
    expect(b.settled).toBe("resolved");
  });

  it("rejects every caller of a failed write with EnqueueError; the next job still goes", async () => {
    const { write, calls } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, write });
    const a = track(enqueuer.enqueue(row("a")));
    const b = track(enqueuer.enqueue(row("b")));
    await turn();
    const c = track(enqueuer.enqueue(row("c")));
    const redisDown = new Error("Connection is closed.");
    calls[0]?.fail(redisDown);
    await turn();
    for (const s of [a, b]) {
      expect(s.settled).toBe("rejected");
      expect(s.error).toBeInstanceOf(EnqueueError);
      expect((s.error as EnqueueError).cause).toBe(redisDown);
    }
    calls[1]?.ack();
    await turn();
    expect(c.settled).toBe("resolved");
  });

  it("enqueueMany: one promise for many reports, settled once every job holding them did, with each report's error in order", async () => {
    const { write, calls, jobs } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, maxReports: 4, write });
    void enqueuer.enqueue(row("a"));
    const many = enqueuer.enqueueMany(ids("b", 5).map(row));
    let outcome: (EnqueueError | undefined)[] | null = null;
    void many.then((errors) => {
      outcome = errors;
    });
    await turn();
    // The batch's reports join the jobs as single reports do: a full job goes at once, the rest
    // waits for its acknowledgement.
    expect(jobs()).toEqual([["a", "b0", "b1", "b2"]]);
    calls[0]?.ack();
    await turn();
    expect(jobs()[1]).toEqual(["b3", "b4"]);
    expect(outcome).toBeNull();
    const redisDown = new Error("Connection is closed.");
    calls[1]?.fail(redisDown);
    await turn();
    const errors = outcome as unknown as (EnqueueError | undefined)[];
    expect(errors).toHaveLength(5);
    expect(errors.slice(0, 3)).toEqual([undefined, undefined, undefined]);
    for (const err of errors.slice(3)) {
      expect(err).toBeInstanceOf(EnqueueError);
      expect(err?.cause).toBe(redisDown);
    }
    expect(await enqueuer.enqueueMany([])).toEqual([]);
  });

  it("passes the writer's own EnqueueError on (e.g. too few replicas confirmed)", async () => {
    const { write, calls } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, write });
    const a = track(enqueuer.enqueue(row("a")));
    await turn();
    const replicas = new EnqueueError("0 of 1 replicas confirmed the job within 1000 ms");
    calls[0]?.fail(replicas);
    await turn();
    expect(a.error).toBe(replicas);
  });

  it("drain writes what is pending at once, busy shard or not, and waits for every write", async () => {
    const { write, calls, jobs } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, maxReports: 2, write });
    void enqueuer.enqueue(row("a"));
    await turn();
    for (const id of ["b", "c", "d"]) void enqueuer.enqueue(row(id));
    const drained = track(enqueuer.drain());
    expect(jobs()).toEqual([["a"], ["b", "c"], ["d"]]);
    calls[2]?.ack();
    calls[1]?.ack();
    await turn();
    expect(drained.settled).toBe("pending");
    calls[0]?.ack();
    await turn();
    expect(drained.settled).toBe("resolved");
  });

  it("drain resolves at once with nothing pending, and does not reject on a failed write", async () => {
    const { write, calls } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, write });
    await enqueuer.drain();
    const lost = track(enqueuer.enqueue(row("a")));
    const drained = enqueuer.drain();
    calls[0]?.fail(new Error("READONLY"));
    await drained;
    expect(lost.settled).toBe("rejected");
  });

  it("reports each write to onFlush: reports, seconds and outcome", async () => {
    const { write, calls } = fakeWriter();
    const flushes: [number, number, boolean][] = [];
    const enqueuer = createEnqueuer({
      ...options,
      write,
      onFlush: (reports, seconds, ok) => flushes.push([reports, seconds, ok]),
    });
    const ok = Promise.all(["a", "b", "c"].map((id) => enqueuer.enqueue(row(id))));
    await turn();
    calls[0]?.ack();
    await ok;
    const failed = enqueuer.enqueue(row("d")).catch(() => {});
    await turn();
    calls[1]?.fail(new Error("down"));
    await failed;
    expect(flushes.map(([reports, , good]) => [reports, good])).toEqual([
      [3, true],
      [1, false],
    ]);
    for (const [, seconds] of flushes) expect(seconds).toBeGreaterThanOrEqual(0);
  });
});

describe("enqueuer with shards failing over", () => {
  it("passes over a shard whose write failed while others take the jobs, then tries it again", async () => {
    const { write, calls } = fakeWriter();
    let clock = 0;
    const enqueuer = createEnqueuer({
      ...options,
      shards: 2,
      shardCooldownMs: 1_000,
      now: () => clock,
      write,
    });
    void enqueuer.enqueue(row("a")).catch(() => {});
    await turn();
    calls[0]?.fail(new Error("Connection is closed."));
    await turn();
    // Shard 0 failed: every job goes to shard 1, waiting for it rather than trying shard 0.
    for (const id of ["b", "c"]) {
      void enqueuer.enqueue(row(id));
      await turn();
    }
    expect(calls.slice(1).map((c) => [c.shard, c.rows.map((r) => r[0])])).toEqual([[1, ["b"]]]);
    calls[1]?.ack();
    await turn();
    expect(calls[2]).toMatchObject({ shard: 1, rows: [row("c")] });
    calls[2]?.ack();
    await turn();
    clock = 1_000;
    void enqueuer.enqueue(row("d"));
    await turn();
    expect(calls[3]).toMatchObject({ shard: 0, rows: [row("d")] });
  });

  it("uses a failed shard when every shard failed lately (one shard: always)", async () => {
    const { write, calls } = fakeWriter();
    const enqueuer = createEnqueuer({ ...options, shardCooldownMs: 60_000, write });
    void enqueuer.enqueue(row("a")).catch(() => {});
    await turn();
    calls[0]?.fail(new Error("down"));
    await turn();
    void enqueuer.enqueue(row("b"));
    await turn();
    expect(calls[1]).toMatchObject({ shard: 0, rows: [row("b")] });
  });
});
