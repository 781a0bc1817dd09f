import { afterAll, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { EnqueueError } from "../../src/queue/enqueue-error.js";
import { createEnqueuer } from "../../src/queue/enqueuer.js";
import { createJobWriter } from "../../src/queue/job-writer.js";
import type { RedisClient } from "../../src/redis/connections.js";
import { eventually } from "../helpers/eventually.js";
import {
  crashLines,
  type FaultStack,
  startFaultStack,
  taggedBody,
} from "../helpers/fault-stack.js";
import { type Load, type Outcome, startLoad } from "../helpers/load.js";

// Redis at `maxmemory` (noeviction) under a real edge. Two ways to a 503: the edge's own gate
// (REDIS_MEMORY_MAX_RATIO, polled every BACKLOG_CHECK_INTERVAL_MS) closes before Redis is full;
// with the gate off, Redis itself refuses the request's first write with OOM. Either way: 503,
// never 200, while memory is short; 200 again once memory frees; and in the end ClickHouse holds
// exactly the reports that got a 200.

const MAXMEMORY = 16 * 1024 * 1024;

let stack: FaultStack | undefined;

afterAll(async () => {
  await stack?.close();
});

async function usedMemory(redis: RedisClient): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);
}

/** Grows a ballast key until Redis uses `target` bytes (or refuses to grow it). */
async function fillTo(redis: RedisClient, target: number): Promise<void> {
  const chunk = "x".repeat(32 * 1024);
  for (let i = 0; i < 2_000 && (await usedMemory(redis)) < target; i++) {
    try {
      await redis.append("ballast", chunk);
    } catch {
      return;
    }
  }
}

function contract503(outcomes: Outcome[]) {
  for (const o of outcomes.filter((x) => x.status !== 200)) {
    expect(o.status, o.error ?? o.body).toBe(503);
    expect(JSON.parse(o.body ?? "")).toMatchObject({ error: "unavailable" });
  }
}

it("Redis full: 503 from the gate and from OOM, never 200; recovers when memory frees", {
  timeout: 120_000,
}, async () => {
  const s = await startFaultStack({ redis: { maxmemory: String(MAXMEMORY) } });
  stack = s;
  const accepted = new Set<number>();
  const refused = new Set<number>();
  const record = (outcomes: Outcome[]) => {
    for (const o of outcomes) (o.status === 200 ? accepted : refused).add(o.seq);
  };
  let seqBase = 0;
  const loadOn = (url: string): Load => {
    const base = seqBase;
    seqBase += 1_000_000;
    return startLoad({
      url,
      key: s.key,
      body: (n) => taggedBody(base + n),
      concurrency: 4,
      ratePerSec: 200,
      maxMs: 60_000,
    });
  };
  const seqs = (load: Load, base: number) =>
    load.outcomes.map((o) => ({ ...o, seq: base + o.seq }));

  // 1. The gate: 90% of maxmemory.
  // The token lets /readyz say why it refuses (security.readyz.test.ts).
  const token = "oom-test-metrics-token-0123";
  const gated = await s.startEdge({ REDIS_MEMORY_MAX_RATIO: "0.9", METRICS_TOKEN: token });
  let load = loadOn(gated.url);
  let base = seqBase - 1_000_000;
  await eventually(() => expect(load.ok().length).toBeGreaterThan(100), { timeoutMs: 20_000 });
  await fillTo(s.admin, MAXMEMORY * 0.95);
  const gateClosed = await eventually(
    async () => {
      const res = await fetch(`${gated.url}/readyz`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ reason: "redis memory is over its bound" });
      return performance.now();
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  await eventually(
    () => expect(load.outcomes.filter((o) => o.start > gateClosed).length).toBeGreaterThan(200),
    { timeoutMs: 20_000 },
  );
  let freed = performance.now();
  await s.admin.del("ballast");
  await eventually(
    () => expect(load.ok().filter((o) => o.start > freed).length).toBeGreaterThan(100),
    { timeoutMs: 20_000 },
  );
  await load.stop();
  let outcomes = seqs(load, base);
  contract503(outcomes);
  const closed = outcomes.filter((o) => o.start > gateClosed && o.end < freed);
  expect(closed.length).toBeGreaterThan(200);
  expect(closed.filter((o) => o.status !== 503)).toStrictEqual([]);
  record(outcomes);

  // 2. No gate: Redis itself refuses the writes.
  const ungated = await s.startEdge({ REDIS_MEMORY_MAX_RATIO: "0" });
  await fillTo(s.admin, MAXMEMORY - 256 * 1024);
  // Redis's memory is no steady figure (clients' buffers come and go): a bound set 1 MiB under
  // what it uses keeps every write refused until the ballast goes, whatever it does meanwhile.
  await s.admin.config("SET", "maxmemory", String((await usedMemory(s.admin)) - 1024 * 1024));
  load = loadOn(ungated.url);
  base = seqBase - 1_000_000;
  const full = await eventually(
    async () => {
      expect(load.outcomes.some((o) => o.status === 503)).toBe(true);
      await expect(s.admin.set("probe", "x")).rejects.toThrow(/OOM/);
      return performance.now();
    },
    { timeoutMs: 30_000, intervalMs: 20 },
  );
  // An enqueue that meets OOM fails with the queue layer's error (the edge answers it with the
  // same 503 as a limiter write that meets OOM: checked on the load's answers below).
  const enqueuer = createEnqueuer({
    write: createJobWriter({
      queues: [s.queue],
      names: [{ prefix: s.env.QUEUE_PREFIX as string, name: s.env.QUEUE_NAME as string }],
      redis: s.admin,
      ackReplicas: 0,
      ackTimeoutMs: 1_000,
    }),
    shards: 1,
    maxReports: 1,
    lingerMs: 0,
  });
  const refusedEnqueue = await enqueuer.enqueue(sampleRow(0, s.project)).catch((e: unknown) => e);
  expect(refusedEnqueue).toBeInstanceOf(EnqueueError);
  await eventually(
    () => expect(load.outcomes.filter((o) => o.start > full).length).toBeGreaterThan(200),
    { timeoutMs: 20_000 },
  );
  freed = performance.now();
  await s.admin.config("SET", "maxmemory", String(MAXMEMORY));
  await s.admin.del("ballast");
  await eventually(
    () => expect(load.ok().filter((o) => o.start > freed).length).toBeGreaterThan(100),
    { timeoutMs: 20_000 },
  );
  await load.stop();
  outcomes = seqs(load, base);
  contract503(outcomes);
  const oom = outcomes.filter((o) => o.start > full && o.end < freed);
  expect(oom.length).toBeGreaterThan(200);
  expect(oom.filter((o) => o.status !== 503)).toStrictEqual([]);
  record(outcomes);
  // Redis's own words stay inside: the 503 bodies are the contract's.
  expect(oom.filter((o) => /OOM|maxmemory/.test(o.body ?? ""))).toStrictEqual([]);

  // 3. A worker drains the queue: exactly the 200s are stored, once.
  await s.startWorker();
  await eventually(
    async () => {
      expect(await s.backlog()).toBe(0);
      expect((await s.stored()).size).toBe(accepted.size);
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const stored = await s.stored();
  expect([...stored.keys()].filter((seq) => !accepted.has(seq))).toStrictEqual([]);
  expect([...stored.values()].filter((v) => v.raw !== 1 || v.daily !== 1)).toStrictEqual([]);
  expect(refused.size).toBeGreaterThan(400);

  for (const p of s.procs) {
    expect(p.child.exitCode, p.output().slice(-2_000)).toBeNull();
    expect(crashLines(p.output())).toStrictEqual([]);
  }
  const exits = await s.stopProcesses();
  expect(exits).toStrictEqual(exits.map(() => ({ code: 0, signal: null })));
});
