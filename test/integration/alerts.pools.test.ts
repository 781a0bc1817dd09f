import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { createLogger } from "../../src/lib/logger.js";
import { type AlertsFixture, alertsFixture } from "../helpers/alerts-fixture.js";
import { type ReadStack, startReadStack } from "../helpers/read-stack.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// One alert per pool transition (docs/pools.md, docs/alerts.md), through the real edge, ingest
// worker, alerts worker and a receiver on 127.0.0.1: three apps calling gpt-4o through one OpenAI
// organisation draw on one limit, so a 70 % tokens rule crossing it sends one warning and, once
// it is back under, one resolve, naming the pool and the member that reported. The same three
// apps without the organisation's header are three series, as before: three of each.

const ORG = "org-Alerts8HvT3kLmNp0aBcDeFg";
const SECRET = "integration-pool-secret-0123456789abcdef";
const APPS = ["chat", "agent", "rag"];
let s: ReadStack;
let fx: AlertsFixture;
let alerts: AlertsWorker;
const receivers: Receiver[] = [];

/** A gpt-4o report of `app`, `remaining` tokens of 10,000 left, through the organisation or not. */
const report = (app: string, remaining: number, pooled: boolean) => ({
  provider: "openai",
  model: "gpt-4o",
  app,
  timestamp: new Date().toISOString(),
  limits: { tokens_limit: 10_000, tokens_remaining: remaining },
  headers: {
    ...(pooled ? { "openai-organization": ORG } : {}),
    "x-ratelimit-limit-tokens": "10000",
    "x-ratelimit-remaining-tokens": String(remaining),
    "x-ratelimit-reset-tokens": "30s",
  },
});

beforeAll(async () => {
  s = await startReadStack({
    POOL_SECRET: SECRET,
    ALERTS_RULES_TTL_MS: "0",
    CONTROL_LISTEN: "api",
  });
  fx = alertsFixture(s.p);
  alerts = createAlertsWorker({
    config: s.p.config,
    redis: s.p.redis,
    clickhouse: s.p.client,
    logger: createLogger("silent", "test"),
  });
  alerts.start();
}, 120_000);

afterAll(async () => {
  await alerts?.close();
  for (const r of receivers) await r.close();
  await fx?.close();
  await s?.close();
});

/** A project with a 70 % / 90 % tokens rule on openai delivering to a receiver of its own. */
async function watched() {
  const keys = await s.project();
  const manage = (
    await s.edge.keyStore.create(keys.project, { defaultPlan: "unlimited", scope: "manage" })
  ).key;
  let secret: string | undefined;
  const receiver = await startReceiver(() => secret);
  receivers.push(receiver);
  const res = await s.api.app.inject({
    method: "POST",
    url: `/api/v1/projects/${keys.project}/alert-rules`,
    headers: { authorization: `Bearer ${manage}`, "content-type": "application/json" },
    payload: JSON.stringify({
      provider: "openai",
      metric: "tokens",
      warn_pct: 70,
      critical_pct: 90,
      webhook: receiver.url,
    }),
  });
  expect(res.statusCode, res.body).toBe(201);
  const rule = res.json() as { id: string; secret: string };
  secret = rule.secret;
  return { keys, receiver, rule };
}

/** Each app reports `remaining`; returns once everything sent is stored, evaluated and delivered. */
async function crossing(key: string, remaining: number, pooled: boolean) {
  for (const app of APPS) await s.send(key, [report(app, remaining, pooled)]);
  await fx.settled();
}

const levels = (r: Receiver) => r.deliveries.map((d) => d.json.data.level);

describe("a tokens rule on apps that share one organisation", () => {
  it("sends one warning and one resolve for the pool, naming it and the member that reported", async () => {
    const { keys, receiver, rule } = await watched();
    await crossing(keys.report, 2_500, true);
    expect(levels(receiver)).toEqual(["warning"]);
    await crossing(keys.report, 9_000, true);
    expect(levels(receiver)).toEqual(["warning", "resolved"]);

    const res = await s.get("/api/v1/headroom?group=pool", keys.read);
    expect(res.statusCode, res.body).toBe(200);
    const [pool] = (res.json() as { pools: { pool: string; members: unknown[] }[] }).pools;
    expect(pool?.members).toHaveLength(3);
    for (const d of receiver.deliveries) {
      expect(d.valid).toBe(true);
      expect(d.json.data).toMatchObject({
        rule_id: rule.id,
        provider: "openai",
        model: "gpt-4o",
        pool: pool?.pool,
        pool_label: null,
      });
      expect(APPS).toContain(d.json.data.app);
      expect(d.body).not.toContain(ORG);
    }
    // The warning names the member whose report crossed first, the resolve the one that ended it.
    expect(receiver.deliveries.map((d) => d.json.data.app)).toEqual(["chat", "chat"]);
  });

  it("sends one per app for the same apps when no report names the organisation", async () => {
    const { keys, receiver } = await watched();
    await crossing(keys.report, 2_500, false);
    expect(levels(receiver)).toEqual(["warning", "warning", "warning"]);
    await crossing(keys.report, 9_000, false);
    expect(levels(receiver)).toHaveLength(6);
    expect(levels(receiver).slice(3)).toEqual(["resolved", "resolved", "resolved"]);
    for (const d of receiver.deliveries) expect(d.json.data.pool).toBeNull();
    expect(new Set(receiver.deliveries.map((d) => d.json.data.app))).toEqual(new Set(APPS));
  });
});
