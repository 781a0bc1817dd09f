import { afterAll, beforeAll, expect, it } from "vitest";
import { type Proc, startProcess } from "../../fixtures/processes.js";
import { WEBHOOK_QUEUE } from "../../src/alerts/queues.js";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { alertsFixture, usageRow } from "../helpers/alerts-fixture.js";
import { type ClickHouseProxy, startClickHouseProxy } from "../helpers/clickhouse-proxy.js";
import { eventually } from "../helpers/eventually.js";
import { crashLines } from "../helpers/fault-stack.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { type Delivery, type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Workers SIGKILLed at the worst moments, as processes: the ingest worker right after ClickHouse
// stored its batch (so the batch is stored again by the next worker, and handed to the alerts
// again), then the alerts worker right after ClickHouse stored the batch's alert events (so its
// evaluation job is redelivered after its state was already updated). Each alert still fires
// and is stored exactly once. Its delivery is at least once, as Standard Webhooks has it: a
// worker descheduled past its job's lock (a loaded machine) sends the same event again, under
// the same webhook-id, which is how receivers deduplicate.

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

/**
 * The alerts a receiver got, one per webhook-id in the order first received. Every delivery is
 * signed, names its event as its webhook-id, and repeats its event's first delivery byte for byte.
 */
function alertsReceived(r: Receiver, project: string): Delivery[] {
  const byId = new Map<string, Delivery>();
  for (const d of r.deliveries.filter((x) => x.json.data.project === project)) {
    expect(d.valid).toBe(true);
    expect(d.id).toBe(d.json.data.id);
    const first = byId.get(d.id);
    if (first) expect(d.body).toBe(first.body);
    else byId.set(d.id, d);
  }
  return [...byId.values()];
}

/** A requests rule (70 / 90 %) of `project` to the receiver; its secret checks the deliveries. */
async function addRule(project: string): Promise<void> {
  const created = await createRuleStore(p.redis, p.config.QUEUE_PREFIX).create({
    project,
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    webhook: receiver.url,
  });
  secret = created.secret;
}

async function kill(w: Proc): Promise<void> {
  w.signal("SIGKILL");
  expect((await w.exited).signal).toBe("SIGKILL");
}

it("ingest and alerts workers SIGKILLed after their inserts landed: no duplicate alert", {
  timeout: 120_000,
}, async () => {
  const project = "p-kill";
  await addRule(project);

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

  // One alert per transition: two events, whatever the number of deliveries.
  const alerts = alertsReceived(receiver, project);
  expect(alerts.map((d) => d.json.data.level)).toEqual(["warning", "critical"]);
  // Stored once each, before any merge, under the ids delivered.
  expect(
    await p.scalar(`SELECT count() FROM ${p.db}.alert_events WHERE project_id = '${project}'`),
  ).toBe(2);
  const stored = await p.client.query({
    query: `SELECT event_id FROM ${p.db}.alert_events_v WHERE project_id = '${project}'`,
    format: "JSONEachRow",
  });
  expect((await stored.json<{ event_id: string }>()).map((r) => r.event_id).sort()).toEqual(
    alerts.map((d) => d.id).sort(),
  );
  expect(await p.distinctCount(project)).toBe(2);
  expect(await p.rawCount(project)).toBe(2);
  expect(alerts2.output()).toMatch(/webhook delivered/);
  for (const w of [ingest2, alerts2]) {
    expect(crashLines(w.output())).toStrictEqual([]);
    w.signal("SIGTERM");
    expect(await w.exited).toStrictEqual({ code: 0, signal: null });
  }
});

it("alerts worker frozen past its webhook job's lock: the alert is delivered again under the same webhook-id, fired once", {
  timeout: 120_000,
}, async () => {
  const project = "p-frozen";
  await addRule(project);
  const ingest = start("workers/ingest.ts");
  const alerts = start("workers/alerts.ts");
  await Promise.all([ingest.waitFor(/worker ready/), alerts.waitFor(/alerts worker ready/)]);

  // The receiver holds the delivery open, so the webhook job is in hand when its worker freezes
  // (as a process descheduled on a loaded machine), until its lock runs out.
  receiver.answer(null);
  await p.queue.add(REPORT_JOB, { v: 1, rows: [usageRow(project, 75)] });
  const first = await eventually(
    () => {
      const d = receiver.deliveries.find((x) => x.json.data.project === project);
      if (!d) throw new Error("no delivery yet");
      return d;
    },
    { timeoutMs: 60_000 },
  );
  alerts.signal("SIGSTOP");
  const lock = `${p.config.QUEUE_PREFIX}:${WEBHOOK_QUEUE}:${first.id}:lock`;
  await eventually(
    async () => {
      if ((await p.redis.exists(lock)) === 1) throw new Error("webhook job still locked");
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  receiver.answer(200);
  alerts.signal("SIGCONT");
  // Resumed, the worker finds its job taken back (stalled) and delivers it again.
  await eventually(
    () => {
      const n = receiver.accepted().filter((x) => x.json.data.project === project).length;
      if (n === 0) throw new Error("not delivered again yet");
    },
    { timeoutMs: 60_000 },
  );
  await fx.settled(60_000);

  const alertsGot = alertsReceived(receiver, project);
  expect(alertsGot.map((d) => d.json.data.level)).toEqual(["warning"]);
  expect(
    receiver.deliveries.filter((x) => x.json.data.project === project).length,
  ).toBeGreaterThanOrEqual(2);
  expect(
    await p.scalar(`SELECT count() FROM ${p.db}.alert_events WHERE project_id = '${project}'`),
  ).toBe(1);
  // The held request is let go, as a receiver's restart would.
  await receiver.down();
  await receiver.up();
  for (const w of [ingest, alerts]) {
    expect(crashLines(w.output())).toStrictEqual([]);
    w.signal("SIGTERM");
    expect(await w.exited).toStrictEqual({ code: 0, signal: null });
  }
});
