import { afterAll, beforeAll, expect, it } from "vitest";
import { createAlertsHook } from "../../src/alerts/ingest-hook.js";
import { createRuleCache } from "../../src/alerts/rule-cache.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { type AlertsFixture, usageRow } from "../helpers/alerts-fixture.js";
import { type AlertsStack, startAlertsStack } from "../helpers/alerts-stack.js";
import { eventually } from "../helpers/eventually.js";
import type { Pipeline } from "../helpers/pipeline.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Alerts end to end: reports stored by an ingest worker, evaluated by the alerts worker, events
// in ClickHouse, signed webhooks to a receiver on 127.0.0.1 that checks every signature.

let s: AlertsStack;
let p: Pipeline;
let fx: AlertsFixture;
const receivers: Receiver[] = [];
const secrets = new Map<string, string>();

beforeAll(async () => {
  s = await startAlertsStack(
    {
      ALERTS_RULES_TTL_MS: "0",
      ALERTS_WEBHOOK_ATTEMPTS: "6",
      ALERTS_WEBHOOK_BACKOFF_MS: "200",
      ALERTS_WEBHOOK_TIMEOUT_MS: "2000",
    },
    { ingest: true },
  );
  ({ p, fx } = s);
});

afterAll(async () => {
  await s?.close();
  for (const r of receivers) await r.close();
});

async function ruleFor(project: string) {
  const receiver = await startReceiver(() => secrets.get(project));
  receivers.push(receiver);
  const { rule, secret } = await fx.rules.create({
    project,
    provider: "openai",
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    webhook: receiver.url,
  });
  secrets.set(project, secret);
  return { rule, receiver };
}

it("70/90 on requests: 50, 75, 95, 95, 60, 40 → one warning, one critical, one resolved", async () => {
  const { rule, receiver } = await ruleFor("p-seq");
  await fx.send("p-seq", [50, 75, 95, 95, 60, 40]);

  const got = receiver.deliveries;
  expect(got.map((d) => d.json.data.level)).toEqual(["warning", "critical", "resolved"]);
  expect(got.every((d) => d.valid)).toBe(true);
  expect(new Set(got.map((d) => d.id)).size).toBe(3);
  expect(got[1]?.json).toMatchObject({
    type: "headroom.alert",
    data: {
      rule_id: rule.id,
      project: "p-seq",
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      metric: "requests",
      level: "critical",
      used_pct: 95,
      limit: 1000,
      remaining: 50,
      reset_ms: 60_000,
    },
  });
  for (const d of got) {
    expect(d.headers["webhook-id"]).toBe(d.json.data.id);
    expect(Object.keys(d.json.data)).toEqual(
      expect.arrayContaining(["exhaustion_eta_s", "report_id", "at"]),
    );
  }

  // Stored for analysts, once each, with the same ids.
  const rs = await p.client.query({
    query: `SELECT event_id, toString(level) AS level FROM ${p.db}.alert_events_v
      WHERE project_id = 'p-seq' ORDER BY at`,
    format: "JSONEachRow",
  });
  const stored = await rs.json<{ event_id: string; level: string }>();
  expect(stored).toEqual(got.map((d) => ({ event_id: d.id, level: d.json.data.level })));
});

it("receiver down for a while: retried with backoff, delivered once", async () => {
  const { receiver } = await ruleFor("p-down");
  await receiver.down();
  await fx.send("p-down", [50]);
  await p.queue.add(REPORT_JOB, { v: 1, rows: [usageRow("p-down", 95)] });
  // Failed attempts pile up while nobody listens.
  const job = await eventually(
    async () => {
      const [j] = await fx.webhooks.getJobs(["delayed", "wait", "active"]);
      expect(j?.attemptsMade).toBeGreaterThanOrEqual(2);
      return j as NonNullable<typeof j>;
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  await receiver.up();
  await fx.settled();
  expect(receiver.deliveries.map((d) => [d.id, d.json.data.level, d.valid])).toEqual([
    [job.id, "critical", true],
  ]);
  expect(await fx.webhooks.getJobState(job.id as string)).toBe("completed");
});

/** A sample of the alerts worker's metrics (as its /metrics serves them). */
async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = await s.alerts.metrics.registry.getSingleMetric(name)?.get();
  const sample = m?.values.find((v) =>
    Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  );
  return sample?.value ?? 0;
}

it("receiver down for good: dead-lettered after every attempt, replayable", async () => {
  const { receiver } = await ruleFor("p-dead");
  receiver.answer(503);
  const failed = { queue: "alerts-webhooks", state: "failed" };
  const before = {
    dead: await metric("headroom_alerts_webhooks_dead_lettered_total"),
    failures: await metric("headroom_alerts_webhook_failures_total"),
    failedJobs: await metric("headroom_alerts_queue_jobs", failed),
  };
  await fx.send("p-dead", [99]);
  // What an operator's alert rules see: the failures, the dead letter, the failed set's depth.
  expect(await metric("headroom_alerts_webhooks_dead_lettered_total")).toBe(before.dead + 1);
  expect(await metric("headroom_alerts_webhook_failures_total")).toBe(before.failures + 6);
  expect(await metric("headroom_alerts_queue_jobs", failed)).toBe(before.failedJobs + 1);
  const [dead] = await fx.webhooks.getFailed();
  expect(dead?.attemptsMade).toBe(6);
  expect(dead?.failedReason).toMatch(/receiver answered 503/);
  expect(receiver.deliveries).toHaveLength(6);
  // Every attempt carried the same event id, each freshly signed.
  expect(new Set(receiver.deliveries.map((d) => d.id))).toEqual(new Set([dead?.id]));
  expect(receiver.deliveries.every((d) => d.valid)).toBe(true);

  receiver.answer(200);
  await dead?.retry("failed", { resetAttemptsMade: true, resetAttemptsStarted: true });
  await fx.settled();
  expect(receiver.accepted().map((d) => d.id)).toEqual([dead?.id]);
  expect(await fx.webhooks.getFailedCount()).toBe(0);
});

it("a batch stored twice (a redelivered job) evaluates once", async () => {
  const { receiver } = await ruleFor("p-twice");
  const rows = [usageRow("p-twice", 80), usageRow("p-twice", 96)];
  const manifest = { token: "0197d2a8-0000-7000-8000-000000000001", rows, jobs: [] };
  const hook = createAlertsHook({
    rules: createRuleCache(fx.rules, 0),
    queue: fx.evalQueue,
    maxJobs: 1_000,
  });
  // As a redelivery does: the same manifest handed over again, before and after evaluation.
  await hook(manifest);
  await hook(manifest);
  await fx.settled();
  await hook(manifest);
  await fx.settled();
  expect(receiver.deliveries.map((d) => d.json.data.level)).toEqual(["warning", "critical"]);
});
