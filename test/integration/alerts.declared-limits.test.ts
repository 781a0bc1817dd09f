import { v4 as uuidv4 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { createLogger } from "../../src/lib/logger.js";
import type {
  DeclarationsReader,
  ProjectDeclarations,
} from "../../src/providers/declared-limit.js";
import { NO_LIMITS } from "../fixtures/providers/source.js";
import { type AlertsFixture, alertsFixture } from "../helpers/alerts-fixture.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Alerts on declared limits and counted windows (issue 45, docs/alerts.md), through the real
// edge, ingest worker, alerts worker and a receiver on 127.0.0.1: a Bedrock model with a
// declared 60 requests a minute, whose reports state nothing, is counted as /headroom counts it,
// so a 70 % / 90 % rule sends one warning at the 42nd report of the minute and one critical at
// the 54th; an Azure report stating 20 requests remaining, with a declared limit of 100, is 80 %
// used and sends a critical to a rule whose critical is 80 %.

let s: ReadStack;
let k: ProjectKeys;
let fx: AlertsFixture;
let alerts: AlertsWorker;
let manage: string;
const receivers: Receiver[] = [];

const declared: ProjectDeclarations = {
  limits: [
    {
      provider: "bedrock",
      model: "anthropic.claude-3-haiku",
      dimension: "requests",
      window: "1m",
      limit: 60,
    },
    { provider: "azure-openai", model: "gpt-4o", dimension: "requests", window: "1m", limit: 100 },
  ],
  pools: [],
};
/** The project's declarations, as the control plane's reader would give them. */
const declarations: DeclarationsReader = {
  forProject: async (project) => (project === k.project ? declared : { limits: [], pools: [] }),
};

beforeAll(async () => {
  s = await startReadStack(
    { ALERTS_RULES_TTL_MS: "0", CONTROL_LISTEN: "api" },
    { worker: { declarations } },
  );
  k = await s.project();
  manage = (await s.edge.keyStore.create(k.project, { defaultPlan: "unlimited", scope: "manage" }))
    .key;
  fx = alertsFixture(s.p);
  alerts = createAlertsWorker({
    config: s.p.config,
    redis: s.p.redis,
    clickhouse: s.p.client,
    logger: createLogger("silent", "test"),
    declarations,
  });
  alerts.start();
}, 120_000);

afterAll(async () => {
  await alerts?.close();
  for (const r of receivers) await r.close();
  await fx?.close();
  await s?.close();
});

/** A requests rule on `provider` delivering to a receiver of its own. */
async function watched(provider: string, warn: number, critical: number) {
  let secret: string | undefined;
  const receiver = await startReceiver(() => secret);
  receivers.push(receiver);
  const res = await s.api.app.inject({
    method: "POST",
    url: `/api/v1/projects/${k.project}/alert-rules`,
    headers: { authorization: `Bearer ${manage}`, "content-type": "application/json" },
    payload: JSON.stringify({
      provider,
      metric: "requests",
      warn_pct: warn,
      critical_pct: critical,
      webhook: receiver.url,
    }),
  });
  expect(res.statusCode, res.body).toBe(201);
  secret = (res.json() as { secret: string }).secret;
  return receiver;
}

/** Sends `reports` in one batch; returns once they are stored, evaluated and delivered. */
async function sent(reports: Record<string, unknown>[]) {
  const res = await s.edge.app.inject({
    method: "POST",
    url: "/api/reports",
    headers: { authorization: `Bearer ${k.report}`, "content-type": "application/json" },
    payload: JSON.stringify(reports),
  });
  expect(res.statusCode, res.body).toBe(200);
  await fx.settled();
}

const levels = (r: Receiver) => r.deliveries.map((d) => d.json.data.level);

describe("a declared limit no report states", () => {
  it("counts Bedrock's reports: one warning at 70 % of 60, one critical at 90 %", async () => {
    const receiver = await watched("bedrock", 70, 90);
    // A minute of its own, ahead of now: every report in it, whatever the time the test runs.
    const minute = Math.ceil(Date.now() / 60_000) * 60_000 + 60_000;
    let n = 0;
    const bedrock = (count: number) =>
      Array.from({ length: count }, () => ({
        id: uuidv4(),
        provider: "bedrock",
        model: "anthropic.claude-3-haiku",
        app: "bed",
        timestamp: new Date(minute + 1_000 + 100 * n++).toISOString(),
        limits: NO_LIMITS,
      }));
    await sent(bedrock(41));
    expect(levels(receiver)).toEqual([]);
    await sent(bedrock(1));
    expect(levels(receiver)).toEqual(["warning"]);
    await sent(bedrock(11));
    expect(levels(receiver)).toEqual(["warning"]);
    await sent(bedrock(1));
    expect(levels(receiver)).toEqual(["warning", "critical"]);
    const [warning, critical] = receiver.deliveries.map((d) => d.json.data);
    expect(warning).toMatchObject({
      provider: "bedrock",
      window: "1m",
      limit: 60,
      remaining: 18,
      used_pct: 70,
    });
    expect(critical).toMatchObject({ window: "1m", limit: 60, remaining: 6, used_pct: 90 });
    // Counted to the end of the UTC minute the reports are in.
    expect(critical?.reset_ms).toBe(60_000 - (1_000 + 100 * 53));
    for (const d of receiver.deliveries) expect(d.valid).toBe(true);
  });
});

describe("a declared limit beside a stated remaining", () => {
  it("gives Azure's stated 20 remaining of a declared 100 its 80 %: one critical", async () => {
    const receiver = await watched("azure-openai", 50, 80);
    await sent([
      {
        provider: "azure-openai",
        model: "gpt-4o",
        app: "az",
        timestamp: new Date().toISOString(),
        limits: NO_LIMITS,
        headers: { "x-ratelimit-remaining-requests": "20" },
      },
    ]);
    expect(levels(receiver)).toEqual(["critical"]);
    expect(receiver.deliveries[0]?.json.data).toMatchObject({
      provider: "azure-openai",
      limit: 100,
      remaining: 20,
      used_pct: 80,
    });
  });
});
