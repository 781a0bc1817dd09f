import { afterAll, beforeAll, expect, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { alertsFixture, usageRow } from "../helpers/alerts-fixture.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { crashLines } from "../helpers/fault-stack.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Workers SIGKILLed at the worst moments, as processes: the ingest worker right after ClickHouse
// stored its batch (so the batch is stored again by the next worker, and handed to the alerts
// again), then the alerts worker right after ClickHouse stored the batch's alert events (so its
// evaluation job is redelivered after its state was already updated). Each alert still fires,
// is stored and is delivered exactly once.

let p: Pipeline;
let proxy: ClickHouseProxy;
let fx: ReturnType<typeof alertsFixture>;
let receiver: Receiver;
let secret: string | undefined;
const procs: Proc[] = [];

beforeAll(async () => {
  p = await startPipeline({ ALERTS_RULES_TTL_MS: "0", ALERTS_WEBHOOK_BACKOFF_MS: "200" });
  proxy = await startClickHouseProxy(p.clickhouse.url);
  fx = alertsFixture(p);
  receiver = await startReceiver(() => secret);
});

afterAll(async () => {
  for (const w of procs) w.signal("SIGKILL");
  await Promise.all(procs.map((w) => w.exited));
  await receiver?.close();
  await proxy?.close();
  await fx?.close();
  await p?.close();
});

function start(entry: string, env: Record<string, string> = {}): Proc {
  const w = startProcess(entry, { ...p.env, ...env });
  procs.push(w);
  return w;
}

async function kill(w: Proc): Promise<void> {
  w.signal("SIGKILL");
  expect((await w.exited).signal).toBe("SIGKILL");
}

it("ingest and alerts workers SIGKILLed after their inserts landed: no duplicate alert", {
  timeout: 120_000,
}, async () => {
  const project = "p-kill";
  const created = await createRuleStore(p.redis, p.config.QUEUE_PREFIX).create({
    project,
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    webhook: receiver.url,
  });
  secret = created.secret;

  const viaProxy = { CLICKHOUSE_URL: proxy.url };
  const ingest1 = start("workers/ingest.ts", viaProxy);
  const alerts1 = start("workers/alerts.ts", viaProxy);
  await Promise.all([ingest1.waitFor(/worker ready/), alerts1.waitFor(/alerts worker ready/)]);
  // Each is killed once ClickHouse ran its first insert, before the answer reaches it.
  const killed = new Set<string>();
  proxy.setPolicy(({ kind, sql }) => {
    if (kind !== "insert") return "pass";
    const who = /alert_events/.test(sql) ? "alerts" : "ingest";
    if (killed.has(who)) return "pass";
    killed.add(who);
    return { action: "drop-after", beforeDrop: () => kill(who === "alerts" ? alerts1 : ingest1) };
  });

  const at = Date.now();
  await p.queue.add(REPORT_JOB, {
    v: 1,
    rows: [usageRow(project, 75, { at }), usageRow(project, 95, { at: at + 1 })],
  });
  await ingest1.exited;
  // The next ingest worker stores the batch again (same manifest, same token) and hands it to the
  // alerts; the alerts worker evaluates it, stores its events, and dies.
  const ingest2 = start("workers/ingest.ts");
  await alerts1.exited;
  expect(killed).toEqual(new Set(["ingest", "alerts"]));
  // The evaluation is redelivered to the next alerts worker once its lock runs out.
  const alerts2 = start("workers/alerts.ts");
  await fx.settled(60_000);

  expect(receiver.deliveries.map((d) => [d.json.data.level, d.valid])).toEqual([
    ["warning", true],
    ["critical", true],
  ]);
  // Stored once each, before any merge.
  expect(
    await p.scalar(`SELECT count() FROM ${p.db}.alert_events WHERE project_id = '${project}'`),
  ).toBe(2);
  expect(await p.distinctCount(project)).toBe(2);
  expect(await p.rawCount(project)).toBe(2);
  expect(alerts2.output()).toMatch(/webhook delivered/);
  for (const w of [ingest2, alerts2]) {
    expect(crashLines(w.output())).toStrictEqual([]);
    w.signal("SIGTERM");
    expect(await w.exited).toStrictEqual({ code: 0, signal: null });
  }
});
