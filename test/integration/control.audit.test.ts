import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createAuditLog } from "../../src/control/audit.js";
import { generateKey } from "../../src/keys/key-format.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";
import { once } from "../helpers/once.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// Every change made through HTTP and through the CLI is in the audit log, with its actor; the CLI
// and HTTP act on the same store (what one does, the other sees); and no key's secret is found
// anywhere it must not be: not in Redis (every key's name and value), not in ClickHouse, not in
// the processes' logs, not in the audit log's answers.

let s: ControlStack;
let receiver: Receiver;
let ruleSecret: string | undefined;
let admin: { key: string; key_id: string };
let project: string;
/** Every key secret this file was given (HTTP answers and CLI output). */
const secrets: string[] = [];
/** Rule signing secrets: stored (the sender signs with them), shown once, logged nowhere. */
const ruleSecrets: string[] = [];
/** Every change made, as (action, target, via). */
const changes: { action: string; target: string; via: "http" | "cli" }[] = [];

beforeAll(async () => {
  s = await startControlStack(12);
  receiver = await startReceiver(() => ruleSecret);
  project = `c-${s.tag}`;
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await s?.close();
});

async function cli(args: string[]) {
  const r = await s.headroom(args);
  expect(r.code, r.stderr).toBe(0);
  return r;
}
const cliJson = async (args: string[]) => JSON.parse((await cli([...args, "--json"])).stdout);

async function http(method: string, url: string, key: string, body?: unknown) {
  const res = await s.call(method, url, key, body);
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json();
}

const rule = () => ({
  metric: "requests",
  warn_pct: 80,
  critical_pct: 95,
  webhook: `${receiver.url}/hooks/tok-${s.tag}`,
});

describe("the CLI and HTTP on one store, audited", () => {
  // Each change is made once, by the first test that needs it (the audit, secret and backup
  // tests read all of them), so each test stands alone.
  const provisioned = once(async () => {
    admin = await cliJson(["keys", "create", "--scope", "admin"]);
    expect(admin.key).toMatch(/^hra_/);
    secrets.push(admin.key);
    changes.push({ action: "key.create", target: admin.key_id, via: "cli" });

    // POST /projects ↔ (the CLI makes projects with their first key)
    await http("POST", "/api/v1/projects", admin.key, { project, plan: "free" });
    changes.push({ action: "project.create", target: project, via: "http" });
    // PUT plan ↔ keys set-plan
    const planned = await http("PUT", `/api/v1/projects/${project}/plan`, admin.key, {
      plan: "pro",
      overrides: { burst: 77 },
    });
    expect(planned).toMatchObject({ plan: "pro", overrides: { burst: 77 } });
    changes.push({ action: "project.set_plan", target: project, via: "http" });
    const viaCli = await cliJson(["keys", "set-plan", "--project", project, "--plan", "free"]);
    // Another plan: the overrides not given are reset, by the same function.
    expect(viaCli).toEqual({ project, plan: "free" });
    changes.push({ action: "project.set_plan", target: project, via: "cli" });
    expect(await http("GET", `/api/v1/projects/${project}`, admin.key)).toMatchObject({
      plan: "free",
      overrides: {},
    });
  });
  const keysChanged = once(async () => {
    await provisioned();
    // POST keys ↔ keys create
    const manage = await http("POST", `/api/v1/projects/${project}/keys`, admin.key, {
      scope: "manage",
    });
    expect(manage.key).toMatch(/^hrm_/);
    secrets.push(manage.key);
    changes.push({ action: "key.create", target: manage.key_id, via: "http" });
    const byManage = await http("POST", `/api/v1/projects/${project}/keys`, manage.key, {
      scope: "report",
    });
    secrets.push(byManage.key);
    changes.push({ action: "key.create", target: byManage.key_id, via: "http" });
    const fromCli = await cliJson(["keys", "create", "--project", project, "--scope", "read"]);
    secrets.push(fromCli.key);
    changes.push({ action: "key.create", target: fromCli.key_id, via: "cli" });
    const imported = generateKey("report");
    secrets.push(imported);
    const imp = await cliJson(["keys", "import", "--project", project, "--key", imported]);
    changes.push({ action: "key.import", target: imp.key_id, via: "cli" });

    // GET keys ↔ keys list: the same keys, by id.
    const listed = await http("GET", `/api/v1/projects/${project}/keys`, manage.key);
    const cliListed = await cliJson(["keys", "list", "--project", project]);
    const ids = (rows: { key_id: string }[]) => rows.map((k) => k.key_id).sort();
    expect(ids(listed.items)).toEqual(ids(cliListed));
    expect(ids(listed.items)).toEqual(
      [manage.key_id, byManage.key_id, fromCli.key_id, imp.key_id].sort(),
    );
    for (const k of listed.items) expect(Object.keys(k)).not.toContain("key");

    // rotate ↔ keys rotate
    const rotated = await http("POST", `/api/v1/keys/${byManage.key_id}/rotate`, manage.key, {
      expires_in_s: 0,
    });
    secrets.push(rotated.key);
    changes.push({ action: "key.rotate", target: byManage.key_id, via: "http" });
    const cliRotated = await cliJson(["keys", "rotate", fromCli.key_id, "--expires-in", "1h"]);
    secrets.push(cliRotated.key);
    changes.push({ action: "key.rotate", target: fromCli.key_id, via: "cli" });
    const after = await http("GET", `/api/v1/projects/${project}/keys`, admin.key);
    const rotatedRow = after.items.find((k: { key_id: string }) => k.key_id === fromCli.key_id);
    expect(rotatedRow.rotated_at).not.toBeNull();

    // DELETE key ↔ keys revoke
    await http("DELETE", `/api/v1/keys/${fromCli.key_id}`, admin.key);
    changes.push({ action: "key.revoke", target: fromCli.key_id, via: "http" });
    await cli(["keys", "revoke", byManage.key_id]);
    changes.push({ action: "key.revoke", target: byManage.key_id, via: "cli" });
    const revoked = (await cliJson(["keys", "list", "--project", project])).filter(
      (k: { revoked: boolean }) => k.revoked,
    );
    expect(ids(revoked)).toEqual([fromCli.key_id, byManage.key_id].sort());
    const viaHttp = await http("GET", `/api/v1/projects/${project}/keys`, admin.key);
    expect(ids(viaHttp.items.filter((k: { revoked: boolean }) => k.revoked))).toEqual(ids(revoked));
  });
  const rulesChanged = once(async () => {
    await provisioned();
    // POST alert-rules ↔ alerts add
    const made = await http("POST", `/api/v1/projects/${project}/alert-rules`, admin.key, rule());
    expect(made.secret).toMatch(/^whsec_/);
    ruleSecrets.push(made.secret);
    changes.push({ action: "alert_rule.create", target: made.id, via: "http" });
    const added = await cliJson([
      "alerts",
      "add",
      "--project",
      project,
      "--metric",
      "tokens",
      "--warn",
      "70",
      "--critical",
      "90",
      "--webhook",
      rule().webhook,
    ]);
    ruleSecrets.push(added.secret);
    changes.push({ action: "alert_rule.create", target: added.id, via: "cli" });

    // GET alert-rules ↔ alerts list
    const listed = await http("GET", `/api/v1/projects/${project}/alert-rules`, admin.key);
    const cliListed = await cliJson(["alerts", "list", "--project", project]);
    expect(listed.items).toEqual(cliListed);
    expect(listed.items.map((r: { id: string }) => r.id).sort()).toEqual(
      [made.id, added.id].sort(),
    );
    for (const r of listed.items) expect(Object.keys(r)).not.toContain("secret");

    // PUT (HTTP only: the CLI removes and adds) and GET
    const updated = await http("PUT", `/api/v1/alert-rules/${made.id}`, admin.key, {
      ...rule(),
      warn_pct: 60,
    });
    expect(updated).toMatchObject({ id: made.id, warn_pct: 60, created_at: made.created_at });
    changes.push({ action: "alert_rule.update", target: made.id, via: "http" });

    // POST test ↔ alerts test: signed with the rule's secret, which is unchanged by the update.
    ruleSecret = made.secret;
    const sent = await http("POST", `/api/v1/alert-rules/${made.id}/test`, admin.key);
    expect(sent).toMatchObject({ ok: true, status: 200 });
    ruleSecret = added.secret;
    await cli(["alerts", "test", added.id]);
    expect(receiver.deliveries.map((d) => d.valid)).toEqual([true, true]);

    // DELETE ↔ alerts remove
    await http("DELETE", `/api/v1/alert-rules/${made.id}`, admin.key);
    changes.push({ action: "alert_rule.delete", target: made.id, via: "http" });
    await cli(["alerts", "remove", added.id]);
    changes.push({ action: "alert_rule.delete", target: added.id, via: "cli" });
    expect((await http("GET", `/api/v1/projects/${project}/alert-rules`, admin.key)).items).toEqual(
      [],
    );
  });
  const everyChange = once(async () => {
    await provisioned();
    await keysChanged();
    await rulesChanged();
  });

  it("an admin key from the CLI provisions a tenant over HTTP", () => provisioned());

  it("keys: created, listed, rotated and revoked by either, seen by the other", () =>
    keysChanged());

  it("alert rules: added, listed, updated, tested and removed by either", () => rulesChanged());

  it("the audit log has an entry for each change, with its actor, by HTTP and the CLI", async () => {
    await everyChange();
    const items: Record<string, unknown>[] = [];
    let cursor: string | null = null;
    do {
      const url: string = `/api/v1/audit?project=${project}&limit=3${cursor ? `&cursor=${cursor}` : ""}`;
      const page = await http("GET", url, admin.key);
      items.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor);
    // Newest first, across pages.
    const times = items.map((e) => Date.parse(e.at as string));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    const cliAudit = await cliJson(["audit", "--project", project, "--limit", "1000"]);
    expect(cliAudit).toEqual(items);

    const logged = items.map((e) => ({
      action: e.action,
      target: e.target,
      via: (e.actor as { kind: string }).kind === "cli" ? "cli" : "http",
    }));
    // The admin key of no project is in the whole log, not the project's.
    const projectChanges = changes.filter((c) => c.target !== admin.key_id);
    for (const c of projectChanges) expect(logged).toContainEqual(c);
    expect(logged).toHaveLength(projectChanges.length);
    for (const e of items) {
      const actor = e.actor as { kind: string; key_id: string | null; user?: string };
      if (actor.kind === "cli") {
        expect(actor.key_id).toBeNull();
        expect(actor.user).toBeTruthy();
      } else expect(actor.key_id).toMatch(/^key_/);
      expect(e.source).toBeTruthy();
    }
    const whole = await http("GET", "/api/v1/audit?limit=500", admin.key);
    expect(whole.items.some((e: { target: string }) => e.target === admin.key_id)).toBe(true);
    // The webhook's path (it may hold a receiver's token) is not in the log.
    expect(JSON.stringify(items)).not.toContain(`tok-${s.tag}`);
  });

  it("no key secret is in Redis, ClickHouse, the logs or the audit answers", async () => {
    await everyChange();
    expect(secrets.length).toBe(7);
    const haystacks: [string, string][] = [];
    // Redis: every key's name and value, of every type.
    for (const key of await s.redis.keys("*")) {
      const type = await s.redis.type(key);
      let value: unknown;
      if (type === "string") value = await s.redis.get(key);
      else if (type === "hash") value = await s.redis.hgetall(key);
      else if (type === "set") value = await s.redis.smembers(key);
      else if (type === "zset") value = await s.redis.zrange(key, 0, -1, "WITHSCORES");
      else if (type === "list") value = await s.redis.lrange(key, 0, -1);
      else if (type === "stream") value = await s.redis.xrange(key, "-", "+");
      else value = type;
      haystacks.push([`redis ${key}`, `${key} ${JSON.stringify(value)}`]);
    }
    // ClickHouse: every table of the pipeline's database.
    const tables = await (
      await s.p.client.query({
        query: `SELECT name FROM system.tables WHERE database = '${s.p.db}' AND engine NOT LIKE '%View%'`,
        format: "JSONEachRow",
      })
    ).json<{ name: string }>();
    expect(tables.length).toBeGreaterThan(0);
    for (const { name } of tables) {
      const rows = await (
        await s.p.client.query({
          query: `SELECT * FROM ${s.p.db}.\`${name}\``,
          format: "JSONEachRow",
        })
      ).text();
      haystacks.push([`clickhouse ${name}`, rows]);
    }
    haystacks.push(["logs", s.logs.join("")]);
    expect(s.logs.length).toBeGreaterThan(0);
    haystacks.push([
      "audit (http)",
      (await s.call("GET", "/api/v1/audit?limit=500", admin.key)).body,
    ]);
    haystacks.push(["audit (cli)", (await cli(["audit", "--limit", "1000"])).stdout]);

    for (const secret of secrets) {
      for (const [where, text] of haystacks) expect(text.includes(secret), where).toBe(false);
    }
    // A rule's signing secret is stored for the sender (its own hash), and nowhere else.
    const secretsHash = `${s.p.config.QUEUE_PREFIX}:alert-secrets`;
    for (const secret of ruleSecrets) {
      for (const [where, text] of haystacks) {
        if (where === `redis ${secretsHash}`) continue;
        expect(text.includes(secret), where).toBe(false);
      }
    }
  });

  it("the audit log and rotated keys travel with headroom backup and restore", async () => {
    await everyChange();
    const dir = mkdtempSync(join(tmpdir(), "headroom-control-backup-"));
    const file = join(dir, "backup.json");
    // An empty database of its own to restore into.
    const url = `${inject("redisUrl")}/13`;
    const target = new Redis(url);
    try {
      await target.flushdb();
      await cli(["backup", file]);
      const restored = await s.headroom(["restore", file], { REDIS_URL: url });
      expect(restored.code, restored.stderr).toBe(0);
      const read = (redis: Redis) =>
        createAuditLog(redis, { retentionDays: 365 }).read({ limit: 1000 });
      const [here, there] = [await read(s.redis), await read(target)];
      expect(here.length).toBeGreaterThan(16);
      expect(there).toEqual(here);
      const hashes = async (redis: Redis) => (await redis.keys("headroom:key-hashes:*")).sort();
      expect(await hashes(target)).toEqual(await hashes(s.redis));
    } finally {
      await target.quit();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
