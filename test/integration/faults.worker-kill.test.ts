import { afterAll, beforeAll, expect, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { workerMetric } from "../../fixtures/worker-metric.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { eventually } from "../helpers/eventually.js";
import { crashLines } from "../helpers/fault-stack.js";
import { DRAINED, type Pipeline, startPipeline } from "../helpers/pipeline.js";

// The same jobs held by a worker that is SIGKILLed after its first insert landed, redelivered, and
// held again by a worker that is SIGKILLed too. Stalled jobs are retried however often they
// stall, never failed: the failed set stays empty, and a third worker lands every report exactly
// once — the first holder's batch goes in again byte for byte (its manifest) and ClickHouse drops
// the repeat, in the table (no FINAL, no merge) and in every view.

let p: Pipeline;
let proxy: ClickHouseProxy;
const procs: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline();
  proxy = await startClickHouseProxy(p.clickhouse.url);
});

afterAll(async () => {
  for (const w of procs) w.signal("SIGKILL");
  await Promise.all(procs.map((w) => w.exited));
  await proxy?.close();
  await p?.close();
});

function worker(env: Record<string, string> = {}): Proc {
  const w = startProcess("workers/ingest.ts", { ...p.env, ...env });
  procs.push(w);
  return w;
}

async function kill(w: Proc): Promise<void> {
  w.signal("SIGKILL");
  expect((await w.exited).signal).toBe("SIGKILL");
}

const JOBS = 20;
const PER_JOB = 10;

/**
 * Resolves once one worker holds every job in its `attempt`-th delivery: all JOBS active, each
 * started `attempt` times. A kill is only meaningful then — on a loaded machine a worker may
 * reach ClickHouse before it has taken every job. The deadline covers a lock running out and
 * two stalled checks (the second holder's way to the jobs), many times over.
 */
function allHeld(attempt: number): Promise<void> {
  const { WORKER_LOCK_DURATION_MS: lock, WORKER_STALLED_INTERVAL_MS: check } = p.config;
  return eventually(
    async () => {
      const active = await p.queue.getActive(0, -1);
      expect(active.map((j) => j.attemptsStarted)).toStrictEqual(Array(JOBS).fill(attempt));
    },
    { timeoutMs: 5 * (lock + 2 * check), intervalMs: 100 },
  ).then(() => undefined);
}

/** Every job is somewhere: nothing was dropped. */
async function jobsKept(): Promise<number> {
  const c = await p.queue.getJobCounts("wait", "active", "delayed", "failed", "completed");
  return Object.values(c).reduce((a, b) => a + b, 0);
}

it("killed twice while holding the same jobs: retried, never failed, stored once", {
  timeout: 120_000,
}, async () => {
  const project = "p-twice";
  const ids = await p.fill(JOBS, PER_JOB, project);

  // Holder 1 stores its first batch (half the reports); ClickHouse acknowledges, and the worker
  // is SIGKILLed before that acknowledgement reaches it, once it holds every job. Batches are
  // cut by size only, so the first is exactly half the reports, however slow the machine.
  const first = worker({
    CLICKHOUSE_URL: proxy.url,
    BATCH_MAX_ROWS: String((JOBS * PER_JOB) / 2),
    BATCH_MAX_WAIT_MS: "60000",
  });
  // The worker may have a second insert in flight: only the first reaches ClickHouse.
  let inserts = 0;
  let firstKilled: Promise<void> | undefined;
  proxy.setPolicy(({ kind }) => {
    if (kind !== "insert") return "pass";
    inserts += 1;
    if (inserts > 1) return { action: "drop-before" };
    firstKilled = allHeld(1).finally(() => kill(first));
    return { action: "drop-after", beforeDrop: () => firstKilled ?? Promise.resolve() };
  });
  await first.exited;
  await firstKilled;
  expect(await p.distinctCount(project)).toBe((JOBS * PER_JOB) / 2);
  expect(await p.queue.getActiveCount()).toBe(JOBS);

  // Holder 2 gets them back as stalled, holds all of them, and is SIGKILLed at its first call
  // to ClickHouse.
  const second = worker({ CLICKHOUSE_URL: proxy.url, BATCH_MAX_WAIT_MS: "3000" });
  let secondKilled: Promise<void> | undefined;
  proxy.setPolicy(() => {
    secondKilled ??= allHeld(2).finally(() => kill(second));
    return { action: "drop-before", beforeDrop: () => secondKilled ?? Promise.resolve() };
  });
  await second.exited;
  await secondKilled;
  expect(second.child.signalCode).toBe("SIGKILL");
  expect(await p.queue.getActiveCount()).toBe(JOBS);
  expect(await jobsKept()).toBe(JOBS);

  // Holder 3 (straight to ClickHouse) finds them stalled a second time and takes them again.
  const third = worker();
  await third.waitFor(/worker ready/);
  await eventually(
    async () => {
      expect(await p.distinctCount(project)).toBe(ids.length);
      expect(await p.jobCounts()).toStrictEqual(DRAINED);
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  // Once: in the table (before any merge) and in every analyst view.
  expect(await p.rawCount(project)).toBe(ids.length);
  expect(await p.rollupCount(project)).toBe(ids.length);
  expect(
    await p.scalar(
      `SELECT sum(reports) FROM ${p.db}.reports_minute_v WHERE project_id = '${project}'`,
    ),
  ).toBe(ids.length);
  expect(
    await p.scalar(`SELECT count() FROM ${p.db}.reports_v WHERE project_id = '${project}'`),
  ).toBe(ids.length);
  // The first holder's batch went in again as it was: ClickHouse kept one copy.
  expect(third.output()).not.toMatch(/job failed/);
  // Every manifest was released once its jobs completed.
  await eventually(
    async () => expect(await p.redis.hlen(`${p.env.QUEUE_PREFIX}:reports:manifest-owners`)).toBe(0),
    { timeoutMs: 10_000 },
  );
  expect(third.child.exitCode).toBeNull();
  expect(crashLines(third.output())).toStrictEqual([]);
  third.signal("SIGTERM");
  expect(await third.exited).toStrictEqual({ code: 0, signal: null });
});

it("two workers SIGKILLed one after the other while both hold jobs: nothing failed, every report once", {
  timeout: 120_000,
}, async () => {
  const project = "p-two-holders";
  const lock = { WORKER_LOCK_DURATION_MS: "2000", WORKER_STALLED_INTERVAL_MS: "1000" };
  // Batches go by a minute's wait or full slots only: no early (group-commit) batch. Without it
  // a loaded machine saw A insert the 8 jobs it held after BATCH_MIN_WAIT_MS, then its other 2:
  // two inserts started two Bs, which shared A's jobs between them.
  const slow = { BATCH_MAX_WAIT_MS: "60000", BATCH_MIN_WAIT_MS: "60000" };
  // A takes half the jobs and inserts them as soon as its 10 slots are full.
  const a = worker({ ...lock, ...slow, CLICKHOUSE_URL: proxy.url, WORKER_CONCURRENCY: "10" });
  await a.waitFor(/worker ready/);
  let b: Proc | undefined;
  let inserts = 0;
  // A's insert waits until B holds the other half; ClickHouse runs it, and A is SIGKILLed before
  // the answer reaches it.
  proxy.setPolicy(({ kind }) => {
    if (kind !== "insert") return "pass";
    inserts += 1;
    return {
      action: "drop-after",
      beforeForward: async () => {
        // B never fills its slots and waits long for its batch: it holds what it takes.
        b = worker({ ...lock, ...slow, WORKER_CONCURRENCY: "21" });
        await eventually(async () => expect(await p.queue.getActiveCount()).toBe(JOBS), {
          timeoutMs: 30_000,
          intervalMs: 50,
        });
      },
      beforeDrop: () => kill(a),
    };
  });
  const ids = await p.fill(JOBS, PER_JOB, project);
  await a.exited;
  expect(inserts).toBe(1);
  expect(await p.distinctCount(project)).toBe((JOBS * PER_JOB) / 2);

  // B takes A's jobs over when their locks run out, and holds all of them; then it is killed too.
  const holder = b as Proc;
  await eventually(
    async () =>
      expect(await workerMetric(holder, "headroom_worker_redelivered_jobs_total")).toBe(JOBS / 2),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  await kill(holder);
  expect(await jobsKept()).toBe(JOBS);

  // C finds all of them stalled (A's for the second time): none fails, each report lands once.
  const c = worker(lock);
  await c.waitFor(/worker ready/);
  await eventually(
    async () => {
      expect(await p.distinctCount(project)).toBe(ids.length);
      expect(await p.jobCounts()).toStrictEqual(DRAINED);
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  expect(await p.rawCount(project)).toBe(ids.length);
  expect(await p.rollupCount(project)).toBe(ids.length);
  expect(await workerMetric(c, "headroom_worker_manifests_reinserted_total")).toBeGreaterThan(0);
  // C must not stay on to take the next test's jobs from the workers it kills.
  c.signal("SIGTERM");
  await c.exited;
});
