import { randomUUID } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { gunzipSync, gzip } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import type { AlertsFixture } from "../helpers/alerts-fixture.js";
import { type AlertsStack, startAlertsStack } from "../helpers/alerts-stack.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import type { Pipeline } from "../helpers/pipeline.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

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

describe("through the control plane (rule create, update, test)", () => {
  // A read stack with the control plane beside the read API, the deployment's defaults (no
  // allowance), and webhook look-ups on a DNS server stand-in that never answers.
  let rs: ReadStack;
  let k: ProjectKeys;
  let manage = "";
  let silent: Socket;
  let queries = 0;
  const DNS_TIMEOUT_MS = 4_000;

  beforeAll(async () => {
    silent = createSocket("udp4");
    silent.on("message", () => {
      queries++;
    });
    await new Promise<void>((r) => silent.bind(0, "127.0.0.1", r));
    rs = await startReadStack({
      CONTROL_LISTEN: "api",
      ALERTS_WEBHOOK_ALLOW: "",
      ALERTS_WEBHOOK_DNS_SERVERS: `127.0.0.1:${(silent.address() as AddressInfo).port}`,
      ALERTS_WEBHOOK_DNS_TIMEOUT_MS: String(DNS_TIMEOUT_MS),
    });
    k = await rs.project();
    manage = (
      await rs.edge.keyStore.create(k.project, { defaultPlan: "unlimited", scope: "manage" })
    ).key;
  }, 120_000);

  afterAll(async () => {
    await rs?.close();
    silent?.close();
  });

  const call = (method: "POST" | "PUT" | "GET", url: string, body?: unknown) =>
    rs.api.app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${manage}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  const rule = (webhook: string) => ({
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    webhook,
  });
  const create = (webhook: string) =>
    call("POST", `/api/v1/projects/${k.project}/alert-rules`, rule(webhook));

  /** Forms of an internal IPv4 address that a NAT64 gateway or translator routes to it. */
  const REFUSED: [string, RegExp][] = [
    ["http://0.0.0.0:8123/", /0\.0\.0\.0 is unspecified/],
    ["http://0.1.2.3/", /0\.1\.2\.3 is unspecified/],
    ["http://[64:ff9b::7f00:1]:8123/", /loopback \(127\.0\.0\.1 in NAT64 form\)/],
    [
      "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
      /link-local \(cloud metadata\) \(169\.254\.169\.254 in NAT64 form\)/,
    ],
    ["http://[64:ff9b:1::a00:1]/", /local-use NAT64/],
    [
      "http://[::ffff:0:7f00:1]:6379/",
      /loopback \(127\.0\.0\.1 in IPv4-translated \(SIIT\) form\)/,
    ],
    ["http://[::ffff:0:a00:1]/", /private \(10\.0\.0\.1 in IPv4-translated \(SIIT\) form\)/],
    ["http://[2606:4700::5efe:a00:1]/", /private \(10\.0\.0\.1 in ISATAP form\)/],
  ];

  /** The project's rules as listed (other tests of this file store rules in it too). */
  const listedRules = async () =>
    (await call("GET", `/api/v1/projects/${k.project}/alert-rules`)).json().items as unknown[];

  it("a rule pointed at 0.0.0.0/8, NAT64, SIIT or ISATAP forms of internal addresses is refused", async () => {
    const before = await listedRules();
    for (const [webhook, why] of REFUSED) {
      const res = await create(webhook);
      expect(res.statusCode, `${webhook}: ${res.body}`).toBe(400);
      expect(res.json().message, webhook).toMatch(/destination refused/);
      expect(res.json().message, webhook).toMatch(why);
    }
    // Nothing stored: a test that ran before may have stored such a rule itself (as one made
    // before the check would be), so the list is compared with what it was.
    expect(await listedRules()).toStrictEqual(before);
  });

  it("a rule's update to such an address is refused and leaves the rule as it was", async () => {
    const made = await create("http://93.184.216.34/hooks/headroom");
    expect(made.statusCode, made.body).toBe(201);
    const id = made.json().id as string;
    for (const [webhook, why] of REFUSED) {
      const res = await call("PUT", `/api/v1/alert-rules/${id}`, rule(webhook));
      expect(res.statusCode, `${webhook}: ${res.body}`).toBe(400);
      expect(res.json().message, webhook).toMatch(why);
    }
    const now = await call("GET", `/api/v1/alert-rules/${id}`);
    expect(now.json().webhook).toBe("http://93.184.216.34/hooks/headroom");
  });

  it("a rule stored before (or under a withdrawn allowance) is refused at its test, unsent", async () => {
    const { rule: stored } = await createRuleStore(rs.p.redis, rs.p.config.QUEUE_PREFIX).create({
      project: k.project,
      ...rule("http://[64:ff9b::7f00:1]:8123/"),
    });
    const res = await call("POST", `/api/v1/alert-rules/${stored.id}/test`, {});
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      ok: false,
      status: null,
      error: expect.stringMatching(
        /destination refused: .*loopback \(127\.0\.0\.1 in NAT64 form\)/,
      ),
    });
  });

  it("a webhook host whose DNS never answers: a clear retryable 400 at its deadline, and nobody else waits", async () => {
    const before = queries;
    const started = Date.now();
    // More look-ups than libuv's thread pool has threads (4).
    const creates = Array.from({ length: 8 }, (_, i) =>
      create(`https://hooks-${i}-${uniqueId()}.never-answers.example/`).then((res) => ({
        res,
        at: Date.now(),
      })),
    );
    let settled = 0;
    for (const c of creates) void c.then(() => settled++);
    // Every look-up has reached the DNS server and none has had an answer.
    await eventually(async () => expect(queries - before).toBeGreaterThanOrEqual(8), {
      timeoutMs: DNS_TIMEOUT_MS / 2,
    });
    // Meanwhile, the thread pool serves others: compression, file reads, a read API answer.
    const gzipped = await promisify(gzip)(Buffer.alloc(1 << 20, "headroom"));
    expect(gunzipSync(gzipped).length).toBe(1 << 20);
    expect((await readFile("package.json", "utf8")).length).toBeGreaterThan(0);
    const read = await rs.get("/api/v1/headroom", k.read, { "accept-encoding": "gzip" });
    expect(read.statusCode).toBe(200);
    expect(settled, "the reads were answered while every look-up still hung").toBe(0);

    for (const { res, at } of await Promise.all(creates)) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().message).toMatch(
        new RegExp(`did not answer within ${DNS_TIMEOUT_MS} ms: try again later`),
      );
      // Bounded by the deadline (with room for a loaded machine), not the system resolver's.
      expect(at - started).toBeLessThan(DNS_TIMEOUT_MS + 5_000);
    }
    const listed = (await call("GET", `/api/v1/projects/${k.project}/alert-rules`)).json();
    expect(
      listed.items.filter((r: { webhook: string }) => r.webhook.includes("never-answers")),
    ).toEqual([]);
  }, 60_000);
});
