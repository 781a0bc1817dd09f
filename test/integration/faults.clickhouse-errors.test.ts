import { afterAll, expect, it } from "vitest";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { eventually } from "../helpers/eventually.js";
import {
  crashLines,
  type FaultStack,
  startFaultStack,
  taggedBody,
} from "../helpers/fault-stack.js";
import { startLoad } from "../helpers/load.js";

// ClickHouse failing at random for half a minute under load, in every way a client can see:
// the embedded server's fault mode refuses 30% of queries before running them (half with
// TOO_MANY_SIMULTANEOUS_QUERIES, half by dropping the connection), and a proxy in front of it
// throws away the answer of 15% of the rest after ClickHouse ran them — inserts that landed
// while the worker was told nothing. Nothing may be lost and nothing counted twice.

const FAULT_MS = 30_000;
const DROP_AFTER_RATE = 0.15;

let stack: FaultStack | undefined;
let proxy: ClickHouseProxy | undefined;

afterAll(async () => {
  await proxy?.close();
  await stack?.close();
});

it("random ClickHouse errors for 30 s under load: every report stored once, rollups exact", {
  timeout: 150_000,
}, async () => {
  const s = await startFaultStack({ clickhouse: { faultErrorRate: 0.3 } });
  stack = s;
  const px = await startClickHouseProxy(s.clickhouse.url, () =>
    Math.random() < DROP_AFTER_RATE ? "drop-after" : "pass",
  );
  proxy = px;
  const workerEnv = { CLICKHOUSE_URL: px.url, BATCH_MAX_WAIT_MS: "200" };
  const [edge, w1, w2] = await Promise.all([
    s.startEdge(),
    s.startWorker(workerEnv),
    s.startWorker(workerEnv),
  ]);
  const load = startLoad({
    url: edge.url,
    key: s.key,
    body: taggedBody,
    concurrency: 6,
    ratePerSec: 250,
    maxMs: FAULT_MS,
  });
  await eventually(
    async () => {
      // The faults are really hitting the workers, both ways.
      expect(px.counts["drop-after"]).toBeGreaterThan(10);
      expect(w1.proc.output()).toMatch(/insert failed: retrying/);
      expect(w2.proc.output()).toMatch(/TOO_MANY_SIMULTANEOUS_QUERIES|retrying/);
    },
    { timeoutMs: FAULT_MS, intervalMs: 500 },
  );
  // The load runs for the whole fault window, then ends by itself.
  const outcomes = await load.finished;
  // The faults end: ClickHouse without its fault mode, the proxy passing everything.
  px.setPolicy(() => "pass");
  await s.restartClickHouse({ faultErrorRate: 0 });

  // Redis was fine all along: every request was accepted.
  expect(outcomes.filter((o) => o.status !== 200)).toStrictEqual([]);
  const ok = new Set(outcomes.map((o) => o.seq));
  expect(ok.size).toBeGreaterThan(1_000);

  await eventually(
    async () => {
      expect(await s.backlog()).toBe(0);
      expect((await s.stored()).size).toBe(ok.size);
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  expect(await s.queue.getFailedCount()).toBe(0);

  // Raw rows, distinct ids, every view: exactly the set of 200s, each once.
  const stored = await s.stored();
  expect([...stored.keys()].filter((seq) => !ok.has(seq))).toStrictEqual([]);
  const notOnce = [...stored].filter(
    ([, v]) => v.raw !== 1 || v.final !== 1 || v.daily !== 1 || v.minute !== 1 || v.latest !== 1,
  );
  expect(notOnce).toStrictEqual([]);
  const ids = new Set(outcomes.map((o) => o.id));
  const [[distinct, raw] = []] = await s.query<[string, string]>(
    `SELECT uniqExact(report_id), count() FROM ${s.db}.reports WHERE project_id = {p:String}`,
  );
  expect(Number(distinct)).toBe(ids.size);
  expect(Number(raw)).toBe(ids.size);
  const storedIds = await s.query<[string]>(
    `SELECT toString(report_id) FROM ${s.db}.reports WHERE project_id = {p:String}`,
  );
  expect(storedIds.filter(([id]) => !ids.has(id))).toStrictEqual([]);

  // Rollup sums: reports, provider hints and credit spend (0.00042 per openrouter call).
  const sent = [...ok].map(taggedBody);
  const hints = sent.filter((b) => b.model === null).length;
  const spendUnits = sent.filter(
    (b) => (b.credits as { request_cost?: number } | null)?.request_cost === 0.00042,
  ).length;
  const [[reports, hintSum, spend] = []] = await s.query<[string, string, string]>(
    `SELECT sum(reports), sum(hints), toInt64(sum(cost_sum) * 100000)
     FROM ${s.db}.reports_daily_v WHERE project_id = {p:String}`,
  );
  expect(Number(reports)).toBe(ok.size);
  expect(Number(hintSum)).toBe(hints);
  expect(Number(spend)).toBe(spendUnits * 42);

  for (const p of s.procs) {
    expect(p.child.exitCode, p.output().slice(-2_000)).toBeNull();
    expect(crashLines(p.output())).toStrictEqual([]);
  }
  const exits = await s.stopProcesses();
  expect(exits).toStrictEqual(exits.map(() => ({ code: 0, signal: null })));
  console.log(
    `clickhouse faults: ${ok.size} reports, proxy ${JSON.stringify(px.counts)}, all stored once`,
  );
});
