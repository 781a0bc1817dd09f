import { execFile } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { createLogger } from "../../src/lib/logger.js";
import { eventually } from "../helpers/eventually.js";
import { once } from "../helpers/once.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Alert rules on any dimension, through the real pipeline: a rule made over the control plane
// (as `headroom alerts add --metric input_tokens` makes it) watches Anthropic's input-tokens
// window, derived by the running parsers from the report's headers. The window goes critical
// while the report's other windows are fine: the rule fires, signed, to a receiver on 127.0.0.1.
// The event names the window's dimension and length in ClickHouse, /api/v1/alerts/events and
// `headroom alerts history`; an event stored before those columns reads as its metric, window null.

let s: ReadStack;
let k: ProjectKeys;
let manage = "";
let alerts: AlertsWorker;
let receiver: Receiver;
let secret = "";
const logger = createLogger("silent", "test");

const AT = Math.floor(Date.now() / 1000) * 1000;
const rfc3339 = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`;

/** Anthropic's documented headers; input tokens 95 % used, every other dimension under 10 %. */
const anthropic = (inputRemaining: number) => ({
  provider: "anthropic",
  model: "claude-sonnet-4",
  app: "chat",
  timestamp: new Date(AT).toISOString(),
  limits: {},
  headers: {
    "anthropic-ratelimit-requests-limit": "1000",
    "anthropic-ratelimit-requests-remaining": "999",
    "anthropic-ratelimit-requests-reset": rfc3339(AT + 60_000),
    "anthropic-ratelimit-tokens-limit": "96000",
    "anthropic-ratelimit-tokens-remaining": "95000",
    "anthropic-ratelimit-tokens-reset": rfc3339(AT + 60_000),
    "anthropic-ratelimit-input-tokens-limit": "80000",
    "anthropic-ratelimit-input-tokens-remaining": String(inputRemaining),
    "anthropic-ratelimit-input-tokens-reset": rfc3339(AT + 45_000),
    "anthropic-ratelimit-output-tokens-limit": "16000",
    "anthropic-ratelimit-output-tokens-remaining": "15900",
    "anthropic-ratelimit-output-tokens-reset": rfc3339(AT + 50_000),
  },
});

beforeAll(async () => {
  s = await startReadStack({ ALERTS_RULES_TTL_MS: "0", CONTROL_LISTEN: "api" });
  k = await s.project();
  manage = (await s.edge.keyStore.create(k.project, { defaultPlan: "unlimited", scope: "manage" }))
    .key;
  receiver = await startReceiver(() => secret);
  alerts = createAlertsWorker({
    config: s.p.config,
    redis: s.p.redis,
    clickhouse: s.p.client,
    logger,
  });
  alerts.start();
}, 120_000);

afterAll(async () => {
  await alerts?.close();
  await receiver?.close();
  await s?.close();
});

/** `headroom alerts …` against this stack, as a person runs it. */
function headroom(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  for (const k of ["REDIS_URL", "QUEUE_PREFIX", "CLICKHOUSE_URL", "CLICKHOUSE_DATABASE"])
    env[k] = s.p.env[k] as string;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["bin/headroom.mjs", "alerts", ...args],
      { env, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const post = (url: string, body: unknown) =>
  s.api.app.inject({
    method: "POST",
    url,
    headers: { authorization: `Bearer ${manage}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });

describe("an alert rule on input_tokens", () => {
  it("is refused when its metric is not a dimension name", async () => {
    for (const metric of ["Input-Tokens", "input tokens", "x".repeat(65)]) {
      const res = await post(`/api/v1/projects/${k.project}/alert-rules`, {
        metric,
        warn_pct: 70,
        critical_pct: 90,
        webhook: receiver.url,
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: "invalid_body" });
    }
  });

  // The rule fires once, for the first test that needs it: each test stands alone.
  const fired = once(async () => {
    const created = await post(`/api/v1/projects/${k.project}/alert-rules`, {
      provider: "anthropic",
      metric: "input_tokens",
      window: "1m",
      warn_pct: 70,
      critical_pct: 90,
      webhook: receiver.url,
    });
    expect(created.statusCode, created.body).toBe(201);
    const rule = created.json() as { id: string; metric: string; window: string; secret: string };
    expect(rule).toMatchObject({ metric: "input_tokens", window: "1m" });
    secret = rule.secret;

    // A rule on tokens beside it: Anthropic's tokens window is 1 % used, so it never fires.
    const tokens = await post(`/api/v1/projects/${k.project}/alert-rules`, {
      metric: "tokens",
      warn_pct: 70,
      critical_pct: 90,
      webhook: receiver.url,
    });
    expect(tokens.statusCode, tokens.body).toBe(201);

    await s.send(k.report, [anthropic(4000)]);
    await s.stored(k.project, 1);
    await eventually(() => expect(receiver.deliveries).toHaveLength(1), { timeoutMs: 20_000 });
    const [delivery] = receiver.deliveries;
    expect(delivery?.valid).toBe(true);
    expect(delivery?.json.data).toMatchObject({
      rule_id: rule.id,
      provider: "anthropic",
      metric: "input_tokens",
      dimension: "input_tokens",
      window: "1m",
      level: "critical",
      used_pct: 95,
      limit: 80_000,
      remaining: 4000,
      reset_ms: 45_000,
    });
  });

  it("fires for Anthropic's critical input-tokens window, and for no other window", () => fired());

  it("stores the event with its dimension and window, listed by the API and alerts history", async () => {
    await fired();
    await eventually(
      async () =>
        expect(
          await s.sql(
            `SELECT metric, dimension, \`window\`, toString(level) AS level
              FROM ${s.db}.alert_events_v WHERE project_id = {p:String}`,
            { p: k.project },
          ),
        ).toEqual([
          { metric: "input_tokens", dimension: "input_tokens", window: "1m", level: "critical" },
        ]),
      { timeoutMs: 20_000 },
    );
    // An event an older release stored: the columns of migration 4 only.
    await s.p.client.insert({
      table: `${s.db}.alert_events`,
      format: "JSONEachRow",
      values: [
        {
          event_id: `evt_${"0".repeat(32)}`,
          rule_id: "alr_old",
          project_id: k.project,
          provider: "openai",
          model: "gpt-4o",
          app: "chat",
          metric: "requests",
          level: "warning",
          used_pct: 75,
          limit: 100,
          remaining: 25,
          reset_ms: null,
          burn_per_s: null,
          exhaustion_eta_s: null,
          warn_pct: 70,
          critical_pct: 90,
          report_id: "00000000-0000-0000-0000-000000000000",
          at: new Date(AT - 60_000).toISOString().replace("T", " ").slice(0, 23),
        },
      ],
    });

    const res = await s.get("/api/v1/alerts/events", k.read);
    expect(res.statusCode, res.body).toBe(200);
    const items = (res.json() as { items: Record<string, unknown>[] }).items;
    expect(items.map((e) => [e.metric, e.dimension, e.window, e.level])).toEqual([
      ["input_tokens", "input_tokens", "1m", "critical"],
      ["requests", "requests", null, "warning"],
    ]);

    const history = await headroom(["history", "--project", k.project, "--json"]);
    expect(history.code, history.stderr).toBe(0);
    expect(
      (JSON.parse(history.stdout) as Record<string, unknown>[]).map((e) => [
        e.metric,
        e.dimension,
        e.window,
      ]),
    ).toEqual([
      ["input_tokens", "input_tokens", "1m"],
      ["requests", "requests", null],
    ]);
    const table = await headroom(["history", "--project", k.project]);
    expect(table.code, table.stderr).toBe(0);
    // Columns are aligned: a cell starts where its heading does.
    const [head = "", ...rows] = table.stdout.split("\n");
    const cell = (row: string | undefined, name: string) =>
      row?.slice(head.indexOf(name)).split(/\s+/)[0];
    expect(head).toMatch(/METRIC\s+DIMENSION\s+WINDOW\s+LEVEL/);
    expect(rows.slice(0, 2).map((r) => [cell(r, "DIMENSION"), cell(r, "WINDOW")])).toEqual([
      ["input_tokens", "1m"],
      ["requests", "-"],
    ]);
  }, 120_000);
});
