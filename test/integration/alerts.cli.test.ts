import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testEvent } from "../../src/alerts/alert-event.js";
import { createEventSink } from "../../src/alerts/event-sink.js";
import { WEBHOOK_JOB } from "../../src/alerts/queues.js";
import type { AlertsFixture } from "../helpers/alerts-fixture.js";
import { type AlertsStack, startAlertsStack } from "../helpers/alerts-stack.js";
import { eventually } from "../helpers/eventually.js";
import type { Pipeline } from "../helpers/pipeline.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// `headroom alerts …` as a user runs it (bin/headroom.mjs in a child process), against the test
// Redis and a real embedded ClickHouse server.

let s: AlertsStack;
let p: Pipeline;
let fx: AlertsFixture;
let receiver: Receiver;
let secret: string | undefined;

const headroom = (args: string[]) => s.cli(args);

beforeAll(async () => {
  s = await startAlertsStack({ ALERTS_WEBHOOK_ATTEMPTS: "1" });
  ({ p, fx } = s);
  receiver = await startReceiver(() => secret);
});

afterAll(async () => {
  await s?.close();
  await receiver?.close();
});

/** A rule of a project of the test's own, added as a user would: each test owns its rule. */
async function addRule(project: string) {
  const add = await s.addRule(project, receiver.url);
  expect(add.code, add.stderr).toBe(0);
  return JSON.parse(add.stdout) as { id: string; secret: string };
}

describe("headroom alerts", () => {
  it("add prints the rule and, once, its secret; list never shows the secret", async () => {
    const add = await s.addRule("acme", receiver.url, {
      args: ["--provider", "OpenAI", "--cooldown", "15m"],
    });
    expect(add.stderr).toBe("");
    expect(add.code).toBe(0);
    const rule = JSON.parse(add.stdout);
    expect(rule).toMatchObject({
      project: "acme",
      provider: "openai",
      metric: "requests",
      warn_pct: 70,
      critical_pct: 90,
      cooldown_s: 900,
      hysteresis_pct: 5,
      webhook: receiver.url,
    });
    expect(rule.id).toMatch(/^alr_/);
    expect(rule.secret).toMatch(/^whsec_/);
    const ruleId = rule.id;

    const list = await headroom(["list", "--project", "acme", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([{ ...rule, secret: undefined }]);
    expect(list.stdout).not.toContain(rule.secret);
    const text = await headroom(["list"]);
    expect(text.stdout).toContain(ruleId);
    expect(text.stdout).not.toContain(rule.secret);
  });

  it("test sends a signed test event to the rule's webhook", async () => {
    const rule = await addRule("acme-test");
    secret = rule.secret;
    const run = await headroom(["test", rule.id, "--json"]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, status: 200 });
    const d = receiver.deliveries.find(
      (x) => (x.json as { data?: { rule_id?: string } })?.data?.rule_id === rule.id,
    );
    expect(d?.valid).toBe(true);
    expect(d?.json).toMatchObject({
      type: "headroom.alert.test",
      data: { rule_id: rule.id, project: "acme-test", metric: "requests" },
    });
  });

  it("refuses bad rules with a usage error that names the problem", async () => {
    const base = ["add", "--project", "acme", "--webhook", receiver.url];
    const crossed = await headroom([
      ...base,
      "--metric",
      "tokens",
      "--warn",
      "90",
      "--critical",
      "80",
    ]);
    expect(crossed.code).toBe(2);
    expect(crossed.stderr).toMatch(/warning threshold must be below the critical one/);
    const metric = await headroom([
      ...base,
      "--metric",
      "Dollars!",
      "--warn",
      "1",
      "--critical",
      "2",
    ]);
    expect(metric.code).toBe(2);
    expect(metric.stderr).toMatch(/--metric[\s\S]*lowercase snake case/);
    const pct = await headroom([...base, "--metric", "tokens", "--warn", "0", "--critical", "150"]);
    expect(pct.code).toBe(2);
  });

  it("history lists stored events, newest first", async () => {
    const { id: ruleId } = await addRule("acme-history");
    const rule = (await fx.rules.get(ruleId)) as NonNullable<
      Awaited<ReturnType<typeof fx.rules.get>>
    >;
    const older = {
      ...testEvent(rule, Date.now() - 60_000),
      id: "evt_a",
      level: "warning" as const,
    };
    const newer = { ...testEvent(rule), id: "evt_b", level: "critical" as const };
    await createEventSink(p.client, p.db).insert([older, newer], "cli-history");
    const run = await headroom(["history", "--project", "acme-history", "--json"]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout).map((e: { event_id: string }) => e.event_id)).toEqual([
      "evt_b",
      "evt_a",
    ]);
    expect((await headroom(["history"])).stdout).toMatch(/critical/);
  });

  it("dead lists webhooks that failed every attempt; replay sends one again", async () => {
    const { id: ruleId } = await addRule("acme-dead");
    receiver.answer(500);
    const body = JSON.stringify({ type: "headroom.alert", data: { n: 1 } });
    await fx.webhooks.add(
      WEBHOOK_JOB,
      { v: 1, event_id: "evt_dead", rule_id: ruleId, url: receiver.url, body },
      { jobId: "evt_dead", attempts: 1 },
    );
    await eventually(async () => expect(await fx.webhooks.getFailedCount()).toBe(1), {
      timeoutMs: 20_000,
    });
    const dead = await headroom(["dead", "--json"]);
    expect(JSON.parse(dead.stdout)).toEqual([
      expect.objectContaining({ id: "evt_dead", rule_id: ruleId, reason: "receiver answered 500" }),
    ]);
    receiver.answer(200);
    const replay = await headroom(["replay", "evt_dead"]);
    expect(replay.code).toBe(0);
    await eventually(
      () => expect(receiver.accepted().filter((d) => d.id === "evt_dead")).toHaveLength(1),
      { timeoutMs: 20_000 },
    );
    expect((await headroom(["replay"])).code).toBe(2);
  });

  it("remove deletes the rule; a second remove is a usage error", async () => {
    const { id: ruleId } = await addRule("acme-remove");
    expect((await headroom(["remove", ruleId])).code).toBe(0);
    expect(
      JSON.parse((await headroom(["list", "--project", "acme-remove", "--json"])).stdout),
    ).toEqual([]);
    const again = await headroom(["remove", ruleId]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/no alert rule/);
  });
});
