import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { eventually } from "../helpers/eventually.js";
import { crashLines } from "../helpers/fault-stack.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { type Proc, startProcess } from "../helpers/processes.js";

// The same jobs held by a worker that is SIGKILLed, redelivered, and held again by a worker that
// is SIGKILLed too. maxStalledCount is 1, so the second stall fails the jobs for good: they must
// wait in the failed set (the DLQ) with every report, and `headroom dlq replay --all` must land
// them exactly once — including the reports the first holder had already stored when it died.

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

const cli = (...args: string[]) =>
  spawnSync(process.execPath, ["bin/headroom.mjs", "dlq", ...args], {
    env: { ...process.env, ...p.env },
    encoding: "utf8",
  });

const JOBS = 20;
const PER_JOB = 10;

/** Every job is somewhere: nothing was dropped. */
async function jobsKept(): Promise<number> {
  const c = await p.queue.getJobCounts("wait", "active", "delayed", "failed", "completed");
  return Object.values(c).reduce((a, b) => a + b, 0);
}

it("killed twice while holding the same jobs: kept in the DLQ, replayed, stored once", {
  timeout: 120_000,
}, async () => {
  const project = "p-twice";
  const ids = await p.fill(JOBS, PER_JOB, project);

  // Holder 1 stores its first batch (half the reports); ClickHouse acknowledges, and the worker
  // is SIGKILLed before that acknowledgement reaches it.
  const first = worker({
    CLICKHOUSE_URL: proxy.url,
    BATCH_MAX_ROWS: String((JOBS * PER_JOB) / 2),
    BATCH_MAX_WAIT_MS: "500",
  });
  // The worker may have a second insert in flight: only the first reaches ClickHouse.
  let inserts = 0;
  proxy.setPolicy(({ kind }) => {
    if (kind !== "insert") return "pass";
    inserts += 1;
    return inserts === 1
      ? { action: "drop-after", beforeDrop: () => kill(first) }
      : { action: "drop-before" };
  });
  await first.exited;
  expect(await p.distinctCount(project)).toBe((JOBS * PER_JOB) / 2);
  expect(await p.queue.getActiveCount()).toBe(JOBS);

  // Holder 2 gets them back as stalled, holds all of them, and is SIGKILLed at its first call
  // to ClickHouse (the look-up of already stored reports).
  const second = worker({ CLICKHOUSE_URL: proxy.url, BATCH_MAX_WAIT_MS: "3000" });
  proxy.setPolicy(() => ({ action: "drop-before", beforeDrop: () => kill(second) }));
  await eventually(() => expect(second.child.signalCode).toBe("SIGKILL"), {
    timeoutMs: 30_000,
    intervalMs: 100,
  });
  expect(await p.queue.getActiveCount()).toBe(JOBS);
  expect(await jobsKept()).toBe(JOBS);

  // Holder 3 (straight to ClickHouse) finds them stalled a second time: failed, not dropped.
  const third = worker();
  await third.waitFor(/worker ready/);
  const failed = await eventually(
    async () => {
      const f = await p.queue.getFailed(0, -1);
      expect(f).toHaveLength(JOBS);
      return f;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  for (const job of failed) {
    expect(job.failedReason).toMatch(/stalled/);
    expect(job.data.rows).toHaveLength(PER_JOB);
  }
  expect(failed.flatMap((j) => j.data.rows.map((r) => String(r[0]))).sort()).toStrictEqual(
    [...ids].sort(),
  );
  const listed = cli("list", "--json");
  expect(listed.status, listed.stderr).toBe(0);
  expect(JSON.parse(listed.stdout) as unknown[]).toHaveLength(JOBS);
  expect(await p.distinctCount(project)).toBe((JOBS * PER_JOB) / 2);

  const replay = cli("replay", "--all");
  expect(replay.status, replay.stderr).toBe(0);
  expect(replay.stdout.match(/^replayed /gm)).toHaveLength(JOBS);

  await eventually(
    async () => {
      expect(await p.distinctCount(project)).toBe(ids.length);
      expect(await p.queue.getJobCounts("wait", "active", "delayed", "failed")).toStrictEqual({
        wait: 0,
        active: 0,
        delayed: 0,
        failed: 0,
      });
    },
    { timeoutMs: 30_000, intervalMs: 200 },
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
  expect(third.child.exitCode).toBeNull();
  expect(crashLines(third.output())).toStrictEqual([]);
  third.signal("SIGTERM");
  expect(await third.exited).toStrictEqual({ code: 0, signal: null });
});
