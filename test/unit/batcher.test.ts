import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type BatcherOptions, createBatcher } from "../../src/worker/batcher.js";

// When a batch is due and how many are delivered at once. Entries are named by id and carry a
// row count; each delivery waits until the test settles it.

type Entry = { id: string; rows: number };

function harness(opts: Partial<BatcherOptions<Entry>> = {}) {
  const deliveries: { ids: string[]; done: () => void; fail: (err: Error) => void }[] = [];
  const failed: { ids: string[]; err: Error }[] = [];
  const batcher = createBatcher<Entry>({
    maxRows: 100,
    maxWaitMs: 1_000,
    maxEntries: 100,
    maxParallel: 2,
    rowsOf: (e) => e.rows,
    deliver: (batch) =>
      new Promise((resolve, reject) => {
        deliveries.push({ ids: batch.map((e) => e.id), done: resolve, fail: reject });
      }),
    onFailed: (batch, err) => failed.push({ ids: batch.map((e) => e.id), err }),
    ...opts,
  });
  const add = (...ids: string[]) => {
    for (const id of ids) batcher.add({ id, rows: 1 });
  };
  const delivered = () => deliveries.map((d) => d.ids);
  return { batcher, deliveries, failed, add, delivered };
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("batcher", () => {
  it("delivers once maxRows rows are in hand", () => {
    const { batcher, delivered } = harness({ maxRows: 5 });
    batcher.add({ id: "a", rows: 2 });
    batcher.add({ id: "b", rows: 2 });
    expect(delivered()).toEqual([]);
    batcher.add({ id: "c", rows: 1 });
    expect(delivered()).toEqual([["a", "b", "c"]]);
  });

  it("never puts more than maxRows rows in a batch, unless one entry alone is bigger", () => {
    const { batcher, delivered } = harness({ maxRows: 5, maxParallel: 3 });
    batcher.add({ id: "a", rows: 3 });
    batcher.add({ id: "b", rows: 3 });
    expect(delivered()).toEqual([["a"]]);
    batcher.add({ id: "huge", rows: 9 });
    expect(delivered()).toEqual([["a"], ["b"], ["huge"]]);
  });

  it("delivers once maxEntries entries are in hand, counting those being delivered", () => {
    const { add, delivered } = harness({ maxEntries: 3, maxParallel: 2 });
    add("a", "b");
    expect(delivered()).toEqual([]);
    add("c");
    expect(delivered()).toEqual([["a", "b", "c"]]);
    // Every job slot is taken (three entries being delivered): waiting for more gains nothing.
    add("d");
    expect(delivered()).toEqual([["a", "b", "c"], ["d"]]);
  });

  it("delivers what it holds once the oldest entry is maxWaitMs old", async () => {
    const { add, delivered } = harness({ maxWaitMs: 200 });
    add("a");
    await vi.advanceTimersByTimeAsync(150);
    add("b");
    await vi.advanceTimersByTimeAsync(49);
    expect(delivered()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(delivered()).toEqual([["a", "b"]]);
  });

  it("uses an injected clock to decide the age of entries", () => {
    let t = 0;
    const { add, delivered } = harness({ maxWaitMs: 100, now: () => t });
    add("a");
    t = 100;
    add("b");
    expect(delivered()).toEqual([["a", "b"]]);
  });

  it("delivers at most maxParallel batches at once; the next starts when one settles", async () => {
    const { add, delivered, deliveries } = harness({ maxRows: 1, maxParallel: 2 });
    add("a", "b", "c", "d");
    expect(delivered()).toEqual([["a"], ["b"]]);
    deliveries[1]?.done();
    await vi.advanceTimersByTimeAsync(0);
    expect(delivered()).toEqual([["a"], ["b"], ["c"]]);
    deliveries[0]?.fail(new Error("insert failed"));
    await vi.advanceTimersByTimeAsync(0);
    expect(delivered()).toEqual([["a"], ["b"], ["c"], ["d"]]);
  });

  it("once the queue runs dry after a full batch, delivers what it holds without lingering", async () => {
    const { batcher, add, delivered, deliveries } = harness({ maxRows: 3, maxWaitMs: 1_000 });
    add("a", "b", "c", "d");
    expect(delivered()).toEqual([["a", "b", "c"]]);
    batcher.drained();
    expect(delivered()).toEqual([["a", "b", "c"], ["d"]]);
    // Back to lingering: that batch was not full.
    deliveries[0]?.done();
    deliveries[1]?.done();
    await vi.advanceTimersByTimeAsync(0);
    add("e");
    batcher.drained();
    expect(delivered()).toEqual([["a", "b", "c"], ["d"]]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(delivered()).toEqual([["a", "b", "c"], ["d"], ["e"]]);
  });

  it("lingers when the queue runs dry under light load (no full batch before)", async () => {
    const { batcher, add, delivered } = harness({ maxRows: 3, maxWaitMs: 1_000 });
    add("a");
    batcher.drained();
    await vi.advanceTimersByTimeAsync(999);
    expect(delivered()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(delivered()).toEqual([["a"]]);
  });

  it("passes a failed delivery's batch and error to onFailed", async () => {
    const { add, deliveries, failed } = harness({ maxRows: 2 });
    add("a", "b");
    const err = new Error("ClickHouse refused");
    deliveries[0]?.fail(err);
    await vi.advanceTimersByTimeAsync(0);
    expect(failed).toEqual([{ ids: ["a", "b"], err }]);
  });

  it("flush delivers everything in hand and resolves once every delivery settled", async () => {
    const { batcher, add, delivered, deliveries } = harness({ maxRows: 2, maxParallel: 1 });
    add("a", "b", "c", "d", "e");
    let flushed = false;
    const flush = batcher.flush().then(() => {
      flushed = true;
    });
    for (let i = 0; i < 3; i++) {
      await vi.advanceTimersByTimeAsync(0);
      expect(flushed).toBe(false);
      deliveries[i]?.done();
    }
    await flush;
    expect(delivered()).toEqual([["a", "b"], ["c", "d"], ["e"]]);
  });

  it("drop hands back the entries not yet delivered, and they are never delivered", async () => {
    const { batcher, add, delivered } = harness({ maxRows: 2, maxParallel: 1 });
    add("a", "b", "c", "d", "e");
    expect(batcher.drop().map((e) => e.id)).toEqual(["c", "d", "e"]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(delivered()).toEqual([["a", "b"]]);
    expect(batcher.drop()).toEqual([]);
  });

  it("with minWaitMs, a batch that old goes while fewer than idleBelow batches are being delivered", async () => {
    const { add, delivered } = harness({
      maxWaitMs: 1_000,
      minWaitMs: 100,
      maxParallel: 4,
      idleBelow: 2,
    });
    add("a");
    await vi.advanceTimersByTimeAsync(60);
    add("b");
    await vi.advanceTimersByTimeAsync(39);
    expect(delivered()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    // 100 ms after "a", nothing being delivered: a group commit, not a 1 s wait.
    expect(delivered()).toEqual([["a", "b"]]);
    add("c");
    await vi.advanceTimersByTimeAsync(100);
    expect(delivered()).toEqual([["a", "b"], ["c"]]);
  });

  it("with minWaitMs, a batch keeps growing while idleBelow batches are being delivered, and goes when one settles", async () => {
    const { add, delivered, deliveries } = harness({
      maxWaitMs: 1_000,
      minWaitMs: 100,
      maxParallel: 4,
      idleBelow: 2,
    });
    add("a");
    await vi.advanceTimersByTimeAsync(100);
    add("b");
    await vi.advanceTimersByTimeAsync(100);
    expect(delivered()).toEqual([["a"], ["b"]]);
    // Both insert slots busy: "c" and "d" wait past 100 ms, gathered into one batch.
    add("c");
    await vi.advanceTimersByTimeAsync(300);
    add("d");
    expect(delivered()).toEqual([["a"], ["b"]]);
    deliveries[0]?.done();
    await vi.advanceTimersByTimeAsync(0);
    expect(delivered()).toEqual([["a"], ["b"], ["c", "d"]]);
    // A slot freed before the batch is minWaitMs old: it goes when it is, not at maxWaitMs.
    deliveries[1]?.done();
    await vi.advanceTimersByTimeAsync(0);
    add("e");
    await vi.advanceTimersByTimeAsync(99);
    expect(delivered()).toEqual([["a"], ["b"], ["c", "d"]]);
    await vi.advanceTimersByTimeAsync(1);
    expect(delivered()).toEqual([["a"], ["b"], ["c", "d"], ["e"]]);
  });

  it("with minIntervalMs, a batch goes early only that long after the previous one went", async () => {
    const { add, delivered, deliveries } = harness({
      maxWaitMs: 1_000,
      minWaitMs: 100,
      minIntervalMs: 600,
      maxParallel: 4,
      idleBelow: 2,
    });
    // A lone report after a quiet spell: at once (100 ms).
    add("a");
    await vi.advanceTimersByTimeAsync(100);
    expect(delivered()).toEqual([["a"]]);
    deliveries[0]?.done();
    // A steady flow: the next batch goes 600 ms after the first went (t = 700), though a slot
    // is free and "b" is 100 ms old at t = 200.
    add("b");
    await vi.advanceTimersByTimeAsync(200);
    add("c");
    await vi.advanceTimersByTimeAsync(399);
    expect(delivered()).toEqual([["a"]]);
    await vi.advanceTimersByTimeAsync(1);
    expect(delivered()).toEqual([["a"], ["b", "c"]]);
    deliveries[1]?.done();
    // And the next 600 ms after that one.
    add("d");
    await vi.advanceTimersByTimeAsync(600);
    expect(delivered()).toEqual([["a"], ["b", "c"], ["d"]]);
  });

  it("with maxRowsInHand, a batch goes at once when the rows waiting and being delivered reach it", async () => {
    const closed: string[] = [];
    const { batcher, add, delivered, deliveries } = harness({
      maxWaitMs: 1_000,
      maxRowsInHand: 3,
      maxParallel: 4,
      onClose: (reason) => closed.push(reason),
    });
    add("a", "b");
    await vi.advanceTimersByTimeAsync(10);
    expect(delivered()).toEqual([]);
    add("c");
    await vi.advanceTimersByTimeAsync(0);
    expect(delivered()).toEqual([["a", "b", "c"]]);
    // The three are still being delivered: one more is in hand past the bound, and goes too.
    add("d");
    await vi.advanceTimersByTimeAsync(0);
    expect(delivered()).toEqual([["a", "b", "c"], ["d"]]);
    deliveries[0]?.done();
    deliveries[1]?.done();
    await vi.advanceTimersByTimeAsync(0);
    // Below the bound again: a batch waits for more.
    add("e");
    await vi.advanceTimersByTimeAsync(999);
    expect(delivered()).toEqual([["a", "b", "c"], ["d"]]);
    const flushing = batcher.flush();
    await vi.advanceTimersByTimeAsync(0);
    deliveries[2]?.done();
    await flushing;
    expect(closed).toEqual(["jobs", "jobs", "close"]);
  });

  it("with minWaitMs and every slot busy, a batch still goes at maxWaitMs", async () => {
    const { add, delivered } = harness({
      maxWaitMs: 1_000,
      minWaitMs: 100,
      maxParallel: 4,
      idleBelow: 1,
    });
    add("a");
    await vi.advanceTimersByTimeAsync(100);
    expect(delivered()).toEqual([["a"]]);
    add("b");
    await vi.advanceTimersByTimeAsync(999);
    expect(delivered()).toEqual([["a"]]);
    await vi.advanceTimersByTimeAsync(1);
    expect(delivered()).toEqual([["a"], ["b"]]);
  });

  it("tells why each batch closed and how long each entry waited", async () => {
    const closed: [string, number[]][] = [];
    const { batcher, add, deliveries } = harness({
      maxRows: 3,
      maxWaitMs: 1_000,
      minWaitMs: 100,
      maxParallel: 4,
      idleBelow: 1,
      onClose: (reason, waited) => closed.push([reason, waited]),
    });
    add("a");
    await vi.advanceTimersByTimeAsync(40);
    add("b");
    await vi.advanceTimersByTimeAsync(60);
    add("c", "d", "e");
    add("f");
    await vi.advanceTimersByTimeAsync(1_000);
    deliveries[0]?.done();
    await vi.advanceTimersByTimeAsync(0);
    add("g");
    const flushed = batcher.flush();
    for (const d of deliveries) d.done();
    await flushed;
    expect(closed).toEqual([
      ["idle", [100, 60]],
      ["rows", [0, 0, 0]],
      ["wait", [1_000]],
      ["close", [0]],
    ]);
  });
});
