import { ClickHouseError } from "@clickhouse/client";
import type { Job } from "bullmq";
import { describe, expect, it, vi } from "vitest";
import type { ReportSink } from "../../src/clickhouse/report-sink.js";
import { createLogger } from "../../src/lib/logger.js";
import type { ReportJobData } from "../../src/queue/reports-queue.js";
import type { ReportRow } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import { createIngestProcessor } from "../../src/worker/ingest-processor.js";
import { LostJobError } from "../../src/worker/manifest-delivery.js";
import type { Manifest } from "../../src/worker/manifest-store.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { eventually } from "../helpers/eventually.js";
import { memoryManifests } from "../helpers/memory-manifests.js";

// The batching logic against a fake sink (the ReportSink interface the real one implements).

type Insert = { rows: ReportRow[]; token: string };

function fakeSink(fail: (rows: ReportRow[], attempt: number) => Error | null = () => null) {
  const inserts: Insert[] = [];
  const stored = new Set<string>();
  let attempt = 0;
  const sink: ReportSink = {
    async insert(rows, token) {
      const err = fail(rows, attempt++);
      if (err) throw err;
      inserts.push({ rows, token });
      for (const r of rows) stored.add(String(r[0]));
    },
    async stored(rows) {
      return new Set(rows.map((r) => String(r[0])).filter((id) => stored.has(id)));
    },
  };
  return { sink, inserts, stored };
}

const row = (id: string): ReportRow => [
  id,
  "p",
  "k",
  "app",
  "openai",
  null,
  "2026-11-20 10:00:00.000",
  "2026-11-20 10:00:00.000",
];
const job = (id: string, rows: ReportRow[], redelivered = false) =>
  ({
    id,
    // This release's shape: the rows go to the sink as they are (no upgrade pads them).
    data: { v: ROW_SHAPES.current, rows },
    attemptsStarted: redelivered ? 2 : 1,
    attemptsMade: 0,
    stalledCounter: 0,
  }) as unknown as Job<ReportJobData>;

function processor(
  sink: ReportSink,
  opts: Partial<{
    maxRows: number;
    maxWaitMs: number;
    maxJobs: number;
    maxParallelBatches: number;
    placeRows: (rows: ReportRow[]) => Promise<ReportRow[]>;
    onInserting: (manifest: Manifest) => void;
    onStored: (manifest: Manifest) => Promise<void>;
  }> = {},
) {
  const dead: { job: string; rows: ReportRow[]; reason: string }[] = [];
  const manifests = memoryManifests();
  const created = createIngestProcessor({
    sink,
    manifests: manifests.store,
    maxRows: opts.maxRows ?? 1_000,
    maxWaitMs: opts.maxWaitMs ?? 60_000,
    maxJobs: opts.maxJobs ?? 100,
    maxParallelInserts: 2,
    maxParallelBatches: opts.maxParallelBatches,
    retryMaxDelayMs: 5,
    placeRows: opts.placeRows,
    onInserting: opts.onInserting,
    onStored: opts.onStored,
    logger: createLogger("silent", "test"),
    metrics: createWorkerMetrics(),
    deadLetter: async (j, rows, reason) => {
      dead.push({ job: String(j.id), rows, reason });
    },
  });
  // Each job is held with a lock token of its own, as BullMQ's worker holds it.
  const p = {
    process: (j: Job<ReportJobData>) => {
      const lock = `lock-${j.id}-${j.attemptsStarted}`;
      manifests.locks.set(String(j.id), lock);
      return created.process(j, lock);
    },
    close: created.close,
  };
  return { p, dead, manifests, created };
}

describe("ingest processor", () => {
  it("gathers many jobs into one insert when the batch fills up", async () => {
    const { sink, inserts } = fakeSink();
    const { p } = processor(sink, { maxRows: 6 });
    await Promise.all([1, 2, 3].map((j) => p.process(job(`j${j}`, [row(`${j}a`), row(`${j}b`)]))));
    expect(inserts).toHaveLength(1);
    expect(inserts[0]?.rows.map((r) => r[0])).toEqual(["1a", "1b", "2a", "2b", "3a", "3b"]);
  });

  it("resolves no job while its insert is held open; all of them once ClickHouse answered", async () => {
    const { sink, inserts } = fakeSink();
    const insert = sink.insert;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = 0;
    sink.insert = async (rows, token, json) => {
      started += 1;
      await held;
      return insert(rows, token, json);
    };
    const { p } = processor(sink, { maxRows: 4 });
    const done: string[] = [];
    const jobs = ["a", "b"].map((id) =>
      p.process(job(id, [row(`${id}1`), row(`${id}2`)])).then(() => done.push(id)),
    );
    await eventually(() => expect(started).toBe(1));
    // Everything else that could run meanwhile has run: timers and I/O turns, not just promises.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(done).toEqual([]);
    expect(inserts).toEqual([]);
    release();
    await Promise.all(jobs);
    expect(done.sort()).toEqual(["a", "b"]);
    expect(inserts).toHaveLength(1);
  });

  it("inserts at once when every job slot is taken, without waiting for the timer", async () => {
    const { sink, inserts } = fakeSink();
    const { p } = processor(sink, { maxJobs: 2, maxWaitMs: 60_000 });
    await Promise.all([p.process(job("a", [row("a")])), p.process(job("b", [row("b")]))]);
    expect(inserts).toHaveLength(1);
  });

  it("retries a transient failure with the same deduplication token", async () => {
    const tokens: string[] = [];
    const { sink, inserts } = fakeSink((_, attempt) =>
      attempt < 3 ? new Error("ECONNREFUSED") : null,
    );
    const insert = sink.insert;
    sink.insert = (rows, token) => {
      tokens.push(token);
      return insert(rows, token);
    };
    await processor(sink, { maxRows: 1 }).p.process(job("a", [row("a")]));
    expect(inserts).toHaveLength(1);
    expect(tokens).toHaveLength(4);
    expect(new Set(tokens).size).toBe(1);
  });

  it("isolates rows refused for their data; their batch-mates land", async () => {
    const parseError = new ClickHouseError({
      message: "Cannot parse",
      code: "27",
      type: "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
    });
    const { sink, stored } = fakeSink((rows) =>
      rows.some((r) => r[0] === "bad") ? parseError : null,
    );
    const { p, dead } = processor(sink, { maxRows: 4 });
    await Promise.all([
      p.process(job("j1", [row("a"), row("bad")])),
      p.process(job("j2", [row("c"), row("d")])),
    ]);
    expect([...stored].sort()).toEqual(["a", "c", "d"]);
    expect(dead).toEqual([
      { job: "j1", rows: [row("bad")], reason: expect.stringContaining("27") },
    ]);
  });

  it("tells onInserting of a manifest as its insert starts, onStored of the rows stored once it is", async () => {
    const parseError = new ClickHouseError({
      message: "Cannot parse",
      code: "27",
      type: "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
    });
    const events: string[] = [];
    const { sink } = fakeSink((rows) => {
      events.push(`insert ${rows.map((r) => r[0]).join(",")}`);
      return rows.some((r) => r[0] === "bad") ? parseError : null;
    });
    const ids = (m: Manifest) => m.rows.map((r) => r[0]).join(",");
    const { p } = processor(sink, {
      maxRows: 4,
      onInserting: (m) => events.push(`inserting ${ids(m)}`),
      onStored: async (m) => {
        events.push(`stored ${ids(m)}`);
      },
    });
    await Promise.all([
      p.process(job("j1", [row("a"), row("bad")])),
      p.process(job("j2", [row("c"), row("d")])),
    ]);
    // Told before the first insert, once; stored: the rows that went in, the refused one not.
    expect(events[0]).toBe("inserting a,bad,c,d");
    expect(events[1]).toBe("insert a,bad,c,d");
    expect(events.filter((e) => e.startsWith("inserting"))).toHaveLength(1);
    expect(events.at(-1)).toBe("stored a,c,d");
  });

  it("tells onInserting of a batch claimed ahead only once it has one of the 2 insert slots", async () => {
    const { sink } = fakeSink();
    const insert = sink.insert;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const events: string[] = [];
    sink.insert = async (rows, token, json) => {
      events.push(`insert ${rows[0]?.[0]}`);
      await held;
      return insert(rows, token, json);
    };
    const { p } = processor(sink, {
      maxRows: 1,
      maxParallelBatches: 4,
      onInserting: (m) => events.push(`inserting ${m.rows[0]?.[0]}`),
    });
    const jobs = ["a", "b", "c"].map((id) => p.process(job(id, [row(id)])));
    await eventually(() => expect(events.filter((e) => e.startsWith("insert "))).toHaveLength(2));
    // The third batch is claimed (at most 4) but waits for a slot: nothing read ahead for it.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(events.filter((e) => e.startsWith("inserting"))).toHaveLength(2);
    release();
    await Promise.all(jobs);
    // Each told right before its own insert, in its slot.
    for (const id of ["a", "b", "c"]) {
      expect(events.indexOf(`insert ${id}`) - events.indexOf(`inserting ${id}`)).toBe(1);
    }
  });

  it("tries onStored again until it succeeds, and settles the jobs only then", async () => {
    // E.g. the hot copy's merge gave up on copies that kept changing (hot-headroom-hook.ts).
    const { sink, inserts } = fakeSink();
    const calls: string[] = [];
    let settled = false;
    const { p } = processor(sink, {
      maxJobs: 1,
      onStored: async (m) => {
        calls.push(m.token);
        expect(settled).toBe(false);
        if (calls.length < 3) throw new Error("copies changed under 8 merges");
      },
    });
    await p.process(job("j1", [row("a")])).then(() => {
      settled = true;
    });
    expect(calls).toHaveLength(3);
    expect(new Set(calls).size).toBe(1);
    expect(inserts).toHaveLength(1);
  });

  it("inserts a redelivered job again with its whole first batch: same rows, same token", async () => {
    const { sink, inserts } = fakeSink();
    const { p, manifests } = processor(sink, { maxJobs: 2 });
    await Promise.all([
      p.process(job("j1", [row("a"), row("b")])),
      p.process(job("j2", [row("c"), row("d")])),
    ]);
    // j1 was completed and left its manifest; j2's worker stalled before completing it. j2 comes
    // back in a batch with a new job, j3.
    await manifests.store.release(["j1"]);
    await Promise.all([
      p.process(job("j2", [row("c"), row("d")], true)),
      p.process(job("j3", [row("e")])),
    ]);
    expect(inserts).toHaveLength(3);
    expect(inserts[1]).toEqual(inserts[0]);
    expect(inserts[2]?.rows).toEqual([row("e")]);
    expect(inserts[2]?.token).not.toBe(inserts[0]?.token);
    await manifests.store.release(["j3"]);
    await manifests.store.release(["j2"]);
    expect(manifests.manifests.size).toBe(0);
  });

  it("lets go of a job another worker holds now, and inserts nothing for it", async () => {
    const { sink, inserts } = fakeSink();
    const { created, manifests } = processor(sink, { maxRows: 1 });
    manifests.locks.set("j", "the-other-worker");
    await expect(created.process(job("j", [row("a")]), "our-stale-lock")).rejects.toThrow(
      /held by another worker/,
    );
    expect(inserts).toHaveLength(0);
  });

  it("adopts the manifest of a job claimed by another worker, instead of a batch of its own", async () => {
    const { sink, inserts } = fakeSink();
    const { p, manifests } = processor(sink, { maxRows: 1 });
    manifests.locks.set("j", "lock-j-1");
    await manifests.store.claim({ token: "their-token", rows: [row("a")], jobs: [["j", 1]] }, [
      { id: "j", lockToken: "lock-j-1" },
    ]);
    await p.process(job("j", [row("a")]));
    expect(inserts).toEqual([{ rows: [row("a")], token: "their-token" }]);
  });

  it("handed its own job again after a stall: only the newest lock counts, the rows go in once", async () => {
    const { sink, inserts } = fakeSink();
    const { created, manifests } = processor(sink, { maxJobs: 2 });
    const stale = created.process(job("j", [row("a")]), "lock-old");
    manifests.locks.set("j", "lock-new");
    const fresh = created.process(job("j", [row("a")], true), "lock-new");
    await expect(stale).rejects.toThrow(/held by another worker/);
    await fresh;
    expect(inserts).toEqual([{ rows: [row("a")], token: expect.any(String) }]);
  });

  it("does not split a refused batch whose jobs it no longer holds", async () => {
    const parseError = new ClickHouseError({
      message: "Cannot parse",
      code: "27",
      type: "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
    });
    let takeOver = () => {};
    const { sink, inserts } = fakeSink((rows) => {
      // The whole batch is refused; by then another worker holds the job.
      takeOver();
      return rows.length > 1 ? parseError : null;
    });
    const { created, manifests } = processor(sink, { maxJobs: 1 });
    takeOver = () => manifests.locks.set("j", "lock-2");
    manifests.locks.set("j", "lock-1");
    const pending = created.process(job("j", [row("a"), row("b")]), "lock-1");
    await expect(pending).rejects.toThrow(/held elsewhere/);
    expect(inserts).toEqual([]);
  });

  it("inserts a manifest only once the replicas hold it (REDIS_ACK_REPLICAS)", async () => {
    const { sink, inserts } = fakeSink();
    const calls: string[] = [];
    const insert = sink.insert;
    sink.insert = (rows, token) => {
      calls.push("insert");
      return insert(rows, token);
    };
    const { p, manifests } = processor(sink, { maxRows: 1 });
    manifests.replication.failures = 2;
    const replicated = manifests.store.replicated;
    manifests.store.replicated = (token, ids) => {
      calls.push("replicated?");
      return replicated(token, ids);
    };
    await p.process(job("a", [row("a")]));
    expect(calls).toEqual(["replicated?", "replicated?", "replicated?", "insert"]);
    expect(manifests.replication.calls).toEqual(["lagging", "lagging", "ok"]);
    expect(inserts).toHaveLength(1);
  });

  it("inserts nothing when a failover took the claim away; the job is let go, to come back", async () => {
    const { sink, inserts } = fakeSink();
    const { p, manifests } = processor(sink, { maxRows: 1 });
    const replicated = manifests.store.replicated;
    manifests.store.replicated = (token, ids) => {
      // The replica promoted in the primary's place never had the claim.
      manifests.owners.clear();
      manifests.manifests.clear();
      return replicated(token, ids);
    };
    await expect(p.process(job("a", [row("a")]))).rejects.toThrow(LostJobError);
    expect(inserts).toHaveLength(0);
  });

  it("flushes what it holds on close", async () => {
    const { sink, inserts } = fakeSink();
    const { p } = processor(sink);
    const done = p.process(job("a", [row("a")]));
    await p.close(1_000);
    await done;
    expect(inserts).toHaveLength(1);
  });

  it("flushes on close a job taken before it whose rows were still being placed", async () => {
    const { sink, inserts } = fakeSink();
    let placed = () => {};
    const held = new Promise<void>((resolve) => {
      placed = resolve;
    });
    const placeRows = async (rows: ReportRow[]) => {
      await held;
      return rows;
    };
    const { p } = processor(sink, { placeRows });
    const done = p.process(job("a", [row("a")]));
    const closed = p.close(5_000);
    placed();
    await closed;
    await done;
    expect(inserts.map((i) => i.rows.length)).toEqual([1]);
    // A job offered once the close began is not taken.
    await expect(p.process(job("b", [row("b")]))).rejects.toThrow("shutting down");
  });

  it("tells the jobs and rows in hand after each change, and inserts at once at maxRowsInHand rows", async () => {
    const { sink, inserts } = fakeSink();
    const insert = sink.insert;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    sink.insert = async (rows, token, json) => {
      await held;
      return insert(rows, token, json);
    };
    const said: [number, number][] = [];
    const manifests = memoryManifests();
    const created = createIngestProcessor({
      sink,
      manifests: manifests.store,
      maxRows: 1_000,
      maxWaitMs: 60_000,
      maxJobs: 100,
      maxRowsInHand: 4,
      onHand: (jobs, rows) => said.push([jobs, rows]),
      maxParallelInserts: 2,
      retryMaxDelayMs: 5,
      logger: createLogger("silent", "test"),
      metrics: createWorkerMetrics(),
      deadLetter: async () => {},
    });
    const run = (id: string, rows: ReportRow[]) => {
      manifests.locks.set(id, `lock-${id}`);
      return created.process(job(id, rows), `lock-${id}`);
    };
    const first = run("a", [row("a1"), row("a2"), row("a3")]);
    expect(said).toEqual([[1, 3]]);
    const second = run("b", [row("b1")]);
    // Four rows in hand: the batch goes without waiting the minute.
    expect(said).toEqual([
      [1, 3],
      [2, 4],
    ]);
    release();
    await Promise.all([first, second]);
    expect(said).toEqual([
      [1, 3],
      [2, 4],
      [1, 1],
      [0, 0],
    ]);
    expect(inserts.flatMap((i) => i.rows.map((r) => r[0]))).toEqual(["a1", "a2", "a3", "b1"]);
  });

  it("ends its close 2 s after the grace period though an insert never answers; its job is not acknowledged", async () => {
    const { sink } = fakeSink();
    let started = 0;
    sink.insert = () => {
      started += 1;
      return new Promise<void>(() => {});
    };
    const { p } = processor(sink);
    let settled = false;
    void p.process(job("a", [row("a")])).then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    vi.useFakeTimers();
    try {
      let closed = false;
      const closing = p.close(1_000).then(() => {
        closed = true;
      });
      await vi.advanceTimersByTimeAsync(0);
      expect(started).toBe(1);
      await vi.advanceTimersByTimeAsync(2_999);
      expect(closed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await closing;
      expect(closed).toBe(true);
      // Neither completed nor failed: its lock expires and the job is delivered again.
      expect(settled).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
