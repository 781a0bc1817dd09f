import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { EVAL_JOB } from "../../src/alerts/queues.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import type { Config } from "../../src/config.js";
import { createLogger } from "../../src/lib/logger.js";
import { alertsFixture, usageRow } from "../helpers/alerts-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Webhook deliveries are shared fairly between projects: one project whose receiver never
// answers, with many alerts queued first, holds a few of the alerts worker's slots, and another
// project's alert still reaches its receiver within seconds (each project has lanes of its own); a receiver that keeps not answering
// is not tried for a while, and still gets every alert, once, when it answers again.

let p: Pipeline;
let fx: ReturnType<typeof alertsFixture>;
let worker: AlertsWorker | undefined;
const receivers: Receiver[] = [];
const secrets = new Map<string, string>();

beforeAll(async () => {
  p = await startPipeline({ ALERTS_RULES_TTL_MS: "0" });
  fx = alertsFixture(p);
});

afterEach(async () => {
  // Held requests are let go first, so the worker's deliveries in hand end at once.
  for (const r of receivers.splice(0)) await r.close();
  await worker?.close(1_000);
  worker = undefined;
  await fx.webhooks.obliterate({ force: true });
  await fx.evalQueue.obliterate({ force: true });
});

afterAll(async () => {
  await fx?.close();
  await p?.close();
});

function startWorker(overrides: Partial<Config> = {}): void {
  worker = createAlertsWorker({
    config: { ...p.config, ...overrides },
    redis: p.redis,
    clickhouse: p.client,
    logger: createLogger("silent", "test"),
  });
  worker.start();
}

/** A project with one rule on every app, delivered to a receiver answering `status`. */
async function project(status: number | null): Promise<{ rule: AlertRule; receiver: Receiver }> {
  const name = `p-${randomBytes(4).toString("hex")}`;
  const receiver = await startReceiver(() => secrets.get(name));
  receivers.push(receiver);
  receiver.answer(status);
  const { rule, secret } = await fx.rules.create({
    project: name,
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    cooldown_s: 0,
    webhook: receiver.url,
  });
  secrets.set(name, secret);
  return { rule, receiver };
}

/** One stored batch of the rule's project, each app at `pct` % used: one alert per app. */
async function evaluate(rule: AlertRule, apps: string[], pct: number): Promise<void> {
  await fx.evalQueue.add(EVAL_JOB, {
    v: 1,
    token: randomBytes(8).toString("hex"),
    rules: [rule],
    rows: apps.map((app) => usageRow(rule.project, pct, { app })),
  });
}

const apps = (n: number) => Array.from({ length: n }, (_, i) => `app-${i}`);

async function webhookJobs(): Promise<number> {
  const counts = await fx.webhooks.getJobCounts();
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

it("a project whose receiver never answers does not delay another project's alert", {
  timeout: 120_000,
}, async () => {
  // The shipped slots and timeout (16, 10 s), with a receiver's cap over its project's: the
  // shipped receiver cap (2) is under the project's (4), so it alone would keep the silent
  // project to 2 slots and hide lanes shared by every project (the other would still find 2).
  const caps = { ALERTS_WEBHOOK_PER_PROJECT: 4, ALERTS_WEBHOOK_PER_RECEIVER: 16 };
  startWorker(caps);
  const silent = await project(null);
  const other = await project(200);
  await evaluate(silent.rule, apps(160), 95);
  // All 160 of its deliveries are queued, and being tried, before the other project's alert.
  await eventually(async () => expect(await webhookJobs()).toBe(160), { timeoutMs: 30_000 });
  await eventually(() => expect(silent.receiver.deliveries.length).toBeGreaterThan(0), {
    timeoutMs: 30_000,
  });
  await evaluate(other.rule, ["chat"], 95);

  const delivery = await eventually(
    () => {
      const [d, ...more] = other.receiver.accepted();
      expect(more).toEqual([]);
      if (!d) throw new Error("the other project's alert has not arrived");
      return d;
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const job = await fx.webhooks.getJob(delivery.id);
  if (!job) throw new Error(`no webhook job ${delivery.id}`);
  // From the moment its event was queued; a 10 s timeout per silent delivery would be many times it.
  expect(delivery.at - job.timestamp).toBeLessThan(5_000);
  expect(delivery.valid).toBe(true);
  expect(delivery.json.data).toMatchObject({ project: other.rule.project, level: "critical" });
  // The silent project holds no more than its share of the slots.
  expect(silent.receiver.deliveries.length).toBeLessThanOrEqual(4);
});

it("a receiver that keeps not answering is not tried for its cool-off, then gets every alert once", {
  timeout: 120_000,
}, async () => {
  startWorker({
    ALERTS_WEBHOOK_TIMEOUT_MS: 300,
    ALERTS_WEBHOOK_PER_RECEIVER: 1,
    ALERTS_WEBHOOK_BREAKER_FAILURES: 2,
    ALERTS_WEBHOOK_BREAKER_COOLOFF_MS: 2_000,
    ALERTS_WEBHOOK_ATTEMPTS: 30,
    ALERTS_WEBHOOK_BACKOFF_MS: 100,
  });
  const silent = await project(null);
  await evaluate(silent.rule, apps(10), 95);
  // Every delivery has been tried and has failed at least once...
  await eventually(
    async () => {
      const jobs = await fx.webhooks.getJobs(["wait", "active", "delayed", "failed", "completed"]);
      expect(jobs).toHaveLength(10);
      for (const j of jobs) expect(j.attemptsMade).toBeGreaterThan(0);
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  // ...yet the receiver was asked fewer times than there are deliveries: the breaker failed them.
  expect(silent.receiver.deliveries.length).toBeLessThan(10);

  silent.receiver.answer(200);
  await eventually(() => expect(silent.receiver.accepted()).toHaveLength(10), {
    timeoutMs: 60_000,
    intervalMs: 100,
  });
  await fx.settled();
  const accepted = silent.receiver.accepted();
  expect(new Set(accepted.map((d) => d.id)).size).toBe(10);
  expect(accepted.every((d) => d.valid)).toBe(true);
  expect(await fx.webhooks.getJobCounts("completed", "failed")).toEqual({
    completed: 10,
    failed: 0,
  });
});
