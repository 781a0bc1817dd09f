import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { workerMetric } from "../../fixtures/worker-metric.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED, type Pipeline, startPipeline } from "../helpers/pipeline.js";

// A worker frozen past its lock (a GC pause, a VM freeze, CPU steal: SIGSTOP here) while it holds
// jobs, under load. The other worker takes the jobs over; the frozen one comes back and carries on
// where it was. Nothing may be lost, and nothing counted twice — in the raw table without FINAL
// and at once (not after merges), and in every rollup — and nothing may end in the failed set.

const LOCK_MS = 2_000;
const STALL_ENV = {
  WORKER_LOCK_DURATION_MS: String(LOCK_MS),
  WORKER_STALLED_INTERVAL_MS: String(LOCK_MS / 2),
};

let p: Pipeline;
let proxy: ClickHouseProxy;
let procs: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline();
  proxy = await startClickHouseProxy(p.clickhouse.url);
});

afterEach(async () => {
  for (const w of procs) {
    w.signal("SIGCONT");
    w.signal("SIGKILL");
  }
  await Promise.all(procs.map((w) => w.exited));
  procs = [];
  proxy.setPolicy(() => "pass");
});

afterAll(async () => {
  await proxy?.close();
  await p?.close();
});

function worker(env: Record<string, string>): Proc {
  const w = startProcess("workers/ingest.ts", { ...p.env, ...STALL_ENV, ...env });
  procs.push(w);
  return w;
}

/** Jobs of 10 reports added every 20 ms until stopped: the load the stall happens under. */
function steadyLoad(project: string) {
  const ids: string[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      ids.push(...(await p.fill(1, 10, project)));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    ids,
    async stop() {
      running = false;
      await done;
    },
  };
}

/** The raw table holds each report once, right now: no FINAL, no waiting for merges. */
async function expectNoDuplicateRows(project: string) {
  // One query, one snapshot: the load goes on, and two queries would see different rows.
  const duplicates = await p.scalar(
    `SELECT count() - uniqExact(report_id) FROM ${p.db}.reports WHERE project_id = '${project}'`,
  );
  expect(duplicates).toBe(0);
}

async function expectExactlyOnce(project: string, ids: string[]) {
  await eventually(
    async () => {
      expect(await p.distinctCount(project)).toBe(ids.length);
      expect(await p.jobCounts()).toStrictEqual(DRAINED);
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  const raw = await p.rawCount(project);
  const daily = await p.rollupCount(project);
  const minute = await p.scalar(
    `SELECT sum(reports) FROM ${p.db}.reports_minute_v WHERE project_id = '${project}'`,
  );
  console.log(
    `${project}: ${ids.length} acked, ${ids.length - (await p.distinctCount(project))} lost, double-counted: raw ${raw - ids.length}, reports_minute ${minute - ids.length}, reports_daily ${daily - ids.length}`,
  );
  expect(raw).toBe(ids.length);
  expect(daily).toBe(ids.length);
  expect(minute).toBe(ids.length);
}

it("frozen while it holds a batch: the other worker takes it over, and on resume nothing is counted twice", {
  timeout: 120_000,
}, async () => {
  const project = "p-stall-holding";
  // The frozen worker waits for its batch to fill: it holds jobs it has not claimed yet.
  const frozen = worker({ BATCH_MAX_WAIT_MS: "3000" });
  await frozen.waitFor(/worker ready/);
  const load = steadyLoad(project);
  await eventually(async () => expect(await p.queue.getActiveCount()).toBeGreaterThan(0), {
    timeoutMs: 20_000,
    intervalMs: 10,
  });
  frozen.signal("SIGSTOP");
  // What it holds is read once it is stopped: read before, a job taken in between (one is added
  // every 20 ms) would be missing from the list. A fetch it had already sent may still land.
  const held = await eventually(
    async () => {
      const ids = async () => (await p.queue.getActive(0, -1)).map((j) => String(j.id)).sort();
      const first = await ids();
      await new Promise((r) => setTimeout(r, 100));
      expect(await ids()).toStrictEqual(first);
      return first;
    },
    { timeoutMs: 5_000, intervalMs: 10 },
  );

  const other = worker({ BATCH_MAX_WAIT_MS: "100" });
  await other.waitFor(/worker ready/);
  // The other worker finds the frozen one's jobs stalled and lands them.
  await eventually(
    async () => {
      for (const id of held) expect(await p.queue.getJob(id)).toBeUndefined();
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  expect(await workerMetric(other, "headroom_worker_redelivered_jobs_total")).toBeGreaterThan(0);

  frozen.signal("SIGCONT");
  // Its batch timer is long overdue: it fires at once, finds the jobs gone to the other worker,
  // and lets them go instead of inserting them.
  await eventually(
    async () =>
      expect(await workerMetric(frozen, "headroom_worker_jobs_lost_to_another_worker_total")).toBe(
        held.length,
      ),
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  await expectNoDuplicateRows(project);

  await load.stop();
  await expectExactlyOnce(project, load.ids);
});

it("frozen during its insert: the other worker inserts the same batch, and the frozen insert is dropped as a repeat", {
  timeout: 120_000,
}, async () => {
  const project = "p-stall-inserting";
  const frozen = worker({ BATCH_MAX_WAIT_MS: "200", CLICKHOUSE_URL: proxy.url });
  await frozen.waitFor(/worker ready/);
  let ranFrozenInsert: () => void = () => {};
  const frozenInsertRan = new Promise<void>((resolve) => {
    ranFrozenInsert = resolve;
  });
  // The frozen worker's first insert: sent, not yet run by ClickHouse. The worker freezes there;
  // the other worker starts, takes the jobs over and inserts their batch. Only then does the
  // frozen insert reach ClickHouse, and its answer is lost, so on resume the worker sends it yet
  // again.
  let intercepted = false;
  proxy.setPolicy(({ kind }) => {
    if (kind !== "insert" || intercepted) return "pass";
    intercepted = true;
    return {
      action: "drop-after",
      beforeForward: async () => {
        frozen.signal("SIGSTOP");
        const o = worker({ BATCH_MAX_WAIT_MS: "100" });
        await eventually(
          async () =>
            expect(
              await workerMetric(o, "headroom_worker_manifests_reinserted_total"),
            ).toBeGreaterThan(0),
          { timeoutMs: 30_000, intervalMs: 100 },
        );
      },
      beforeDrop: async () => ranFrozenInsert(),
    };
  });
  const load = steadyLoad(project);
  await frozenInsertRan;
  await expectNoDuplicateRows(project);

  frozen.signal("SIGCONT");
  // It sends its insert again (same rows, same token: a repeat ClickHouse drops), then finds its
  // jobs completed by the other worker.
  await eventually(
    async () =>
      expect(await workerMetric(frozen, "headroom_worker_rows_inserted_total")).toBeGreaterThan(0),
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  await expectNoDuplicateRows(project);

  await load.stop();
  await expectExactlyOnce(project, load.ids);
});
