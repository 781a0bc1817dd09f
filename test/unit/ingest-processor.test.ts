import { ClickHouseError } from "@clickhouse/client";
import type { Job } from "bullmq";
import { describe, expect, it } from "vitest";
import type { ReportSink } from "../../src/clickhouse/report-sink.js";
import { createLogger } from "../../src/lib/logger.js";
import type { ReportJobData } from "../../src/queue/reports-queue.js";
import type { ReportRow } from "../../src/report/report-schema.js";
import { createIngestProcessor } from "../../src/worker/ingest-processor.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";

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
    async existing(ids) {
      return new Set(ids.filter((id) => stored.has(id)));
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
    data: { v: 1, rows },
    attemptsStarted: redelivered ? 2 : 1,
    attemptsMade: 0,
    stalledCounter: 0,
  }) as unknown as Job<ReportJobData>;

function processor(
  sink: ReportSink,
  opts: Partial<{ maxRows: number; maxWaitMs: number; maxJobs: number }> = {},
) {
  const dead: { job: string; rows: ReportRow[]; reason: string }[] = [];
  const p = createIngestProcessor({
    sink,
    maxRows: opts.maxRows ?? 1_000,
    maxWaitMs: opts.maxWaitMs ?? 60_000,
    maxJobs: opts.maxJobs ?? 100,
    maxParallelInserts: 2,
    retryMaxDelayMs: 5,
    logger: createLogger("silent", "test"),
    metrics: createWorkerMetrics(),
    deadLetter: async (j, rows, reason) => {
      dead.push({ job: String(j.id), rows, reason });
    },
  });
  return { p, dead };
}

describe("ingest processor", () => {
  it("gathers many jobs into one insert when the batch fills up", async () => {
    const { sink, inserts } = fakeSink();
    const { p } = processor(sink, { maxRows: 6 });
    await Promise.all([1, 2, 3].map((j) => p.process(job(`j${j}`, [row(`${j}a`), row(`${j}b`)]))));
    expect(inserts).toHaveLength(1);
    expect(inserts[0]?.rows.map((r) => r[0])).toEqual(["1a", "1b", "2a", "2b", "3a", "3b"]);
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

  it("drops rows of a redelivered job that are already stored", async () => {
    const { sink, inserts, stored } = fakeSink();
    stored.add("a");
    const { p } = processor(sink, { maxRows: 2 });
    await p.process(job("j", [row("a"), row("b")], true));
    expect(inserts.flatMap((i) => i.rows.map((r) => r[0]))).toEqual(["b"]);
  });

  it("flushes what it holds on close", async () => {
    const { sink, inserts } = fakeSink();
    const { p } = processor(sink);
    const done = p.process(job("a", [row("a")]));
    await p.close(1_000);
    await done;
    expect(inserts).toHaveLength(1);
  });
});
