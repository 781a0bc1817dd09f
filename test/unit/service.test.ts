import { describe, expect, it } from "vitest";
import { DEFAULT_PLANS } from "../../src/config.js";
import { type ControlConfig, createControl, type Principal } from "../../src/control/service.js";
import { HttpError } from "../../src/http/errors.js";
import type { KeyLookup } from "../../src/keys/key-store.js";
import { fakeAuditLog, fakeKeyStore, fakeRuleStore } from "../helpers/control-fakes.js";

// The control service's decisions, over in-memory stores behind its own interfaces: who may do
// what, the bounds it holds every caller to (CLI and HTTP alike), the caps of a plan, and what
// a tenant's audit view tells of the operator. The stores are tested on Redis elsewhere.

const config: ControlConfig = {
  PLANS: { ...DEFAULT_PLANS, tiny: { monthly: null, burst: 1, caps: { keys: 2, alert_rules: 3 } } },
  DEFAULT_PLAN: "unlimited",
  QUEUE_PREFIX: "{t}",
  ALERTS_WEBHOOK_ALLOW: ["127.0.0.1"],
  ALERTS_WEBHOOK_TIMEOUT_MS: 1_000,
  ALERTS_WEBHOOK_DNS_SERVERS: [],
  ALERTS_WEBHOOK_DNS_TIMEOUT_MS: 2_000,
  ALERTS_WEBHOOK_DNS_MAX_CONCURRENT: 32,
  AUDIT_RETENTION_DAYS: 365,
  AUDIT_MAX_ENTRIES_PER_PROJECT: 1_000,
};

const cli: Principal = { kind: "cli", user: "ops-person", source: "ops-host.internal" };

function setup() {
  const stores = { keys: fakeKeyStore(), rules: fakeRuleStore(), audit: fakeAuditLog() };
  const control = createControl(null, config, { stores });
  /** A principal of a key made by the CLI, as the routes make it (source: the client). */
  const asKey = (k: { key_id: string; project: string | null; scope: string }): Principal => ({
    kind: "key",
    key: {
      keyId: k.key_id,
      projectId: k.project ?? "*",
      scope: k.scope as KeyLookup["scope"],
      plan: "",
      overrides: {},
    },
    source: "198.51.100.9",
  });
  return { stores, control, asKey };
}

const rule = {
  metric: "requests",
  warn_pct: 70,
  critical_pct: 90,
  webhook: "http://127.0.0.1:9/h",
};

async function refusal(p: Promise<unknown>): Promise<HttpError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpError);
  return err as HttpError;
}

describe("rotateKey", () => {
  it("refuses an overlap past 30 days (2592000 s) from the CLI and a key alike, before rotating", async () => {
    const { stores, control, asKey } = setup();
    await control.createProject(cli, { project: "acme" });
    const k = await control.createKey(cli, "acme", { scope: "report" });
    const manage = asKey(await control.createKey(cli, "acme", { scope: "manage" }));
    for (const who of [cli, manage]) {
      const err = await refusal(control.rotateKey(who, k.key_id, 2_592_001));
      expect(err.status).toBe(400);
      expect(err.message).toContain("2592000");
      expect((await refusal(control.rotateKey(who, k.key_id, -1))).status).toBe(400);
    }
    expect(stores.keys.rotations).toBe(0);
    const at = await control.rotateKey(cli, k.key_id, 2_592_000);
    expect(Date.parse(at.old_key_expires_at) - Date.parse(at.rotated_at as string)).toBe(
      2_592_000_000,
    );
  });
});

describe("who may", () => {
  it("a manage key acts on its own project only: another's is 403 by path, 404 by id", async () => {
    const { control, asKey } = setup();
    await control.createProject(cli, { project: "a" });
    await control.createProject(cli, { project: "b" });
    const a = asKey(await control.createKey(cli, "a", { scope: "manage" }));
    const bRule = await control.createRule(cli, "b", rule);
    const bKey = await control.createKey(cli, "b", { scope: "report" });
    expect((await refusal(control.createRule(a, "b", rule))).status).toBe(403);
    expect((await refusal(control.listKeys(a, "b"))).status).toBe(403);
    expect((await refusal(control.removeRule(a, bRule.id))).status).toBe(404);
    expect((await refusal(control.revokeKey(a, bKey.key_id))).status).toBe(404);
    expect((await refusal(control.readAudit(a, { project: "b", limit: 10 }))).status).toBe(403);
    expect((await refusal(control.setPlan(a, "a", { plan: "pro" }))).status).toBe(403);
    const report = asKey(await control.createKey(cli, "a", { scope: "report" }));
    expect((await refusal(control.listRules(report, "a"))).status).toBe(403);
  });

  it("an update of a rule gone meanwhile is a 404, and writes no audit entry", async () => {
    const { stores, control } = setup();
    await control.createProject(cli, { project: "a" });
    const made = await control.createRule(cli, "a", rule);
    stores.rules.update = async () => null; // removed between the read and the write
    const before = stores.audit.entries.length;
    expect((await refusal(control.updateRule(cli, made.id, rule))).status).toBe(404);
    expect(stores.audit.entries).toHaveLength(before);
  });
});

describe("caps", () => {
  it("a project holds its plan's alert rules and keys, 409 with the cap past them", async () => {
    const { control, asKey } = setup();
    await control.createProject(cli, { project: "t", plan: "tiny" });
    const manage = asKey(await control.createKey(cli, "t", { scope: "manage" }));
    const second = await control.createKey(manage, "t", { scope: "report" });
    const third = await refusal(control.createKey(manage, "t", { scope: "report" }));
    expect(third.status).toBe(409);
    expect(third.toBody()).toMatchObject({ error: "conflict", limit: 2 });
    // The CLI too; a revoked key frees its place.
    expect((await refusal(control.createKey(cli, "t", { scope: "read" }))).status).toBe(409);
    await control.revokeKey(manage, second.key_id);
    await control.createKey(manage, "t", { scope: "report" });

    for (let i = 0; i < 3; i++) await control.createRule(manage, "t", rule);
    const fourth = await refusal(control.createRule(manage, "t", rule));
    expect(fourth.status).toBe(409);
    expect(fourth.toBody()).toMatchObject({ error: "conflict", limit: 3 });
  });

  it("a plan without caps gets 100 keys and 100 alert rules", async () => {
    const { control } = setup();
    await control.createProject(cli, { project: "d" });
    for (let i = 0; i < 100; i++) await control.createRule(cli, "d", rule);
    expect((await refusal(control.createRule(cli, "d", rule))).toBody()).toMatchObject({
      limit: 100,
    });
    for (let i = 0; i < 100; i++) await control.createKey(cli, "d", { scope: "report" });
    expect(
      (await refusal(control.createKey(cli, "d", { scope: "report" }))).toBody(),
    ).toMatchObject({ limit: 100 });
  });
});

describe("the audit log", () => {
  it("names the actor: the CLI's user and host, a key's id and address", async () => {
    const { stores, control, asKey } = setup();
    await control.createProject(cli, { project: "a" });
    const m = await control.createKey(cli, "a", { scope: "manage" });
    await control.createRule(asKey(m), "a", rule);
    const [made, key, byKey] = stores.audit.entries;
    expect(made).toMatchObject({
      action: "project.create",
      actor: { kind: "cli", user: "ops-person" },
    });
    expect(key?.source).toBe("ops-host.internal");
    expect(byKey).toMatchObject({
      action: "alert_rule.create",
      actor: { key_id: m.key_id, kind: "manage" },
      source: "198.51.100.9",
    });
    // A rule's webhook is kept as its origin only.
    expect(JSON.stringify(byKey)).not.toContain('/h"');
  });

  it("a tenant's view names the operator's actions \"operator\" only; an admin's view is whole", async () => {
    const { control, asKey } = setup();
    await control.createProject(cli, { project: "a" });
    const manage = asKey(await control.createKey(cli, "a", { scope: "manage" }));
    const admin = asKey(await control.createKey(cli, null, { scope: "admin" }));
    await control.createKey(admin, "a", { scope: "report" });
    await control.createKey(manage, "a", { scope: "read" });

    const seen = (await control.readAudit(manage, { limit: 100 })).map((r) => r.entry);
    expect(seen).toHaveLength(4);
    expect(seen[0]).toMatchObject({ actor: { kind: "manage" }, source: "198.51.100.9" });
    for (const e of seen.slice(1)) {
      expect(e.actor).toEqual({ key_id: null, kind: "operator" });
      expect(e.source).toBeNull();
    }
    const text = JSON.stringify(seen);
    for (const leak of [
      "ops-person",
      "ops-host.internal",
      (admin as { key: KeyLookup }).key.keyId,
    ]) {
      expect(text).not.toContain(leak);
    }
    const whole = (await control.readAudit(admin, { project: "a", limit: 100 })).map(
      (r) => r.entry,
    );
    expect(whole.map((e) => e.actor.kind)).toEqual(["manage", "admin", "cli", "cli"]);
    expect(whole[1]).toMatchObject({ source: "198.51.100.9" });
    expect(whole[3]).toMatchObject({ actor: { user: "ops-person" }, source: "ops-host.internal" });
  });
});
