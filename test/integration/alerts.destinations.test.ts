import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlertsFixture } from "../helpers/alerts-fixture.js";
import { type AlertsStack, startAlertsStack } from "../helpers/alerts-stack.js";
import type { Pipeline } from "../helpers/pipeline.js";

// No tenant reaches another through its webhook: a rule pointed inside the deployment (here the
// embedded ClickHouse's HTTP port, with an INSERT that forges a report of another project) is
// refused by `headroom alerts add`, and refused again by the alerts worker when it sends, on the
// address it connects to. Nothing is inserted; the delivery is dead-lettered, naming the rule.

let s: AlertsStack;
let p: Pipeline;
let fx: AlertsFixture;

/** `headroom alerts …` as a tenant's operator runs it; `env` adds to the pipeline's settings. */
const headroom = (args: string[], env?: Record<string, string>) => s.cli(args, env);

const addRule = (project: string, webhook: string, env?: Record<string, string>) =>
  s.addRule(project, webhook, { env });

/** The attack: a webhook that is an INSERT of a forged report of project `victim`. */
function forgingWebhook(): string {
  const now = new Date().toISOString().replace("T", " ").replace("Z", "");
  const row = {
    report_id: randomUUID(),
    project_id: "victim",
    key_id: "key_forged",
    app: "forged",
    provider: "openai",
    model: "gpt-4o",
    timestamp: now,
    received_at: now,
    requests_limit: 1000,
    requests_remaining: 1,
  };
  const query = `INSERT INTO ${p.db}.reports FORMAT JSONEachRow ${JSON.stringify(row)}`;
  return `${p.env.CLICKHOUSE_URL}/?query=${encodeURIComponent(query)}`;
}

const victimRows = async () => {
  const rs = await p.client.query({
    query: `SELECT count() AS n FROM ${p.db}.reports WHERE project_id = 'victim'`,
    format: "JSONEachRow",
  });
  return Number((await rs.json<{ n: string }>())[0]?.n);
};

beforeAll(async () => {
  // No operator allowance: the deployment's own defaults.
  s = await startAlertsStack(
    {
      ALERTS_WEBHOOK_ALLOW: "",
      ALERTS_RULES_TTL_MS: "0",
      ALERTS_WEBHOOK_ATTEMPTS: "3",
      ALERTS_WEBHOOK_BACKOFF_MS: "100",
    },
    { ingest: true },
  );
  ({ p, fx } = s);
});

afterAll(async () => {
  await s?.close();
});

describe("a webhook inside the deployment", () => {
  it("is refused by `alerts add`, with exit 2 and a message naming the rule", async () => {
    const chOrigin = new URL(p.env.CLICKHOUSE_URL as string).origin;
    const redisPort = new URL(p.env.REDIS_URL as string).port;
    const cases: [string, RegExp][] = [
      [
        forgingWebhook(),
        new RegExp(
          `invalid rule: webhook ${chOrigin.replace(/[.]/g, "\\.")} for project attacker: destination refused: 127\\.0\\.0\\.1 is loopback`,
        ),
      ],
      [`http://localhost:${redisPort}/`, /localhost resolves to .* is (unspecified or )?loopback/],
      [`http://[::ffff:127.0.0.1]:${redisPort}/`, /::ffff:7f00:1 is loopback/],
      ["http://169.254.169.254/latest/meta-data/", /link-local \(cloud metadata\)/],
    ];
    const runs = await Promise.all(cases.map(([webhook]) => addRule("attacker", webhook)));
    runs.forEach((run, i) => {
      const [webhook, message] = cases[i] as [string, RegExp];
      expect(run.stderr, webhook).toMatch(message);
      expect(run.stderr).toMatch(/ALERTS_WEBHOOK_ALLOW/);
      expect(run.code, webhook).toBe(2);
    });
    const list = await headroom(["list", "--project", "attacker", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([]);
    // CLI processes on a loaded machine: each takes seconds to start.
  }, 180_000);

  it("is refused again when the alerts worker sends: no forged row, the delivery dead-lettered", async () => {
    // Accepted at creation under an operator allowance that the alerts worker does not have (one
    // withdrawn since, or a name that resolved elsewhere then): the send is checked on its own.
    const add = await addRule("attacker-send", forgingWebhook(), {
      ALERTS_WEBHOOK_ALLOW: "127.0.0.1",
    });
    expect(add.code, add.stderr).toBe(0);
    const { id: ruleId } = JSON.parse(add.stdout) as { id: string };

    await fx.send("attacker-send", [95]);
    expect(await victimRows()).toBe(0);

    const failed = await fx.webhooks.getFailed(0, -1);
    expect(failed.map((j) => [j.data.rule_id, j.failedReason, j.attemptsMade])).toEqual([
      [
        ruleId,
        expect.stringMatching(
          new RegExp(`^rule ${ruleId}: webhook destination refused: 127\\.0\\.0\\.1 is loopback`),
        ),
        // Not retried: it stays refused until an operator allows it.
        1,
      ],
    ]);
  });
});
