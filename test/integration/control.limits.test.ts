import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createLogger } from "../../src/lib/logger.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";

// What one tenant can cost the others through the control plane (SECURITY.md): its writes are
// limited per key and per project (429 with Retry-After), its project holds at most its plan's
// keys and alert rules (409 past them, 100 each by default), and what its writes leave in Redis
// (rules, the audit log) stays bounded however long it keeps writing.

let s: ControlStack;
/** An API on the same Redis whose control plane allows 20 writes a minute per key, 30 per project. */
let limited: Api;

const TINY = { monthly: null, burst: 100, caps: { keys: 2, alert_rules: 3 } };

beforeAll(async () => {
  s = await startControlStack(15, {
    PLANS: JSON.stringify({ tiny: TINY }),
    AUDIT_MAX_ENTRIES_PER_PROJECT: "50",
  });
  limited = await createApi(
    { ...s.p.config, CONTROL_WRITES_PER_MIN_PER_KEY: 20, CONTROL_WRITES_PER_MIN_PER_PROJECT: 30 },
    createLogger("silent", "test"),
    { clickhouse: s.p.client },
  );
}, 120_000);

afterAll(async () => {
  await limited?.close();
  await s?.close();
});

const rule = (n = 0) => ({
  metric: "requests",
  warn_pct: 70 + (n % 20),
  critical_pct: 95,
  webhook: "http://127.0.0.1:9/hook",
});

/** A project of its own (on `plan`), with a manage key. */
async function tenant(plan?: string) {
  const project = `c-${s.tag}-${Math.random().toString(36).slice(2, 8)}`;
  await s.control.createProject(s.cli, { project, ...(plan ? { plan } : {}) });
  const manage = await s.control.createKey(s.cli, project, { scope: "manage" });
  return { project, key: manage.key, keyId: manage.key_id };
}

const statusesOf = (answers: LightMyRequestResponse[]) => {
  const counts: Record<number, number> = {};
  for (const a of answers) counts[a.statusCode] = (counts[a.statusCode] ?? 0) + 1;
  return counts;
};

const call = (
  app: Api["app"],
  method: string,
  url: string,
  key: string,
  body?: unknown,
): Promise<LightMyRequestResponse> =>
  app.inject({
    method: method as "POST",
    url,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });

describe("control plane writes are limited per key and per project", () => {
  it("a flood of POST /alert-rules gets 429 with Retry-After; other tenants and the operator are served", async () => {
    const a = await tenant();
    const flood = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        call(limited.app, "POST", `/api/v1/projects/${a.project}/alert-rules`, a.key, rule(i)),
      ),
    );
    expect(statusesOf(flood)).toEqual({ 201: 20, 429: 40 });
    for (const res of flood.filter((r) => r.statusCode === 429)) {
      expect(res.json().error).toBe("rate_limited");
      const after = Number(res.headers["retry-after"]);
      expect(after).toBeGreaterThanOrEqual(1);
      expect(after).toBeLessThanOrEqual(60);
    }
    // Every write counts, not only POSTs; reads do not.
    const made = flood.find((r) => r.statusCode === 201)?.json();
    expect(
      (await call(limited.app, "PUT", `/api/v1/alert-rules/${made.id}`, a.key, rule())).statusCode,
    ).toBe(429);
    expect(
      (await call(limited.app, "DELETE", `/api/v1/alert-rules/${made.id}`, a.key)).statusCode,
    ).toBe(429);
    expect(
      (await call(limited.app, "GET", `/api/v1/alert-rules/${made.id}`, a.key)).statusCode,
    ).toBe(200);

    // A second manage key of the project gets what is left of the project's 30, no more.
    const second = await s.control.createKey(s.cli, a.project, { scope: "manage" });
    const more = await Promise.all(
      Array.from({ length: 15 }, () =>
        call(limited.app, "POST", `/api/v1/projects/${a.project}/alert-rules`, second.key, rule()),
      ),
    );
    expect(statusesOf(more)).toEqual({ 201: 10, 429: 5 });

    // Another tenant, and the operator's admin key on the flooded project, are served.
    const b = await tenant();
    const other = await call(
      limited.app,
      "POST",
      `/api/v1/projects/${b.project}/alert-rules`,
      b.key,
      rule(),
    );
    expect(other.statusCode, other.body).toBe(201);
    const admin = await s.control.createKey(s.cli, null, { scope: "admin" });
    const operator = await call(limited.app, "DELETE", `/api/v1/alert-rules/${made.id}`, admin.key);
    expect(operator.statusCode, operator.body).toBe(200);
  }, 60_000);
});

describe("a project holds at most its plan's keys and alert rules", () => {
  it("the 101st alert rule is refused with 409, made ones at once included, until one is removed", async () => {
    const t = await tenant();
    const post = (n: number) =>
      s.call("POST", `/api/v1/projects/${t.project}/alert-rules`, t.key, rule(n));
    for (let i = 0; i < 90; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, (_, j) => post(i + j)));
      expect(statusesOf(batch)).toEqual({ 201: 10 });
    }
    // 20 at once around the cap: exactly 10 are made.
    const racing = await Promise.all(Array.from({ length: 20 }, (_, j) => post(90 + j)));
    expect(statusesOf(racing)).toEqual({ 201: 10, 409: 10 });
    const refused = await post(101);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ error: "conflict", limit: 100, remaining: 0 });
    const listed = await s.call("GET", `/api/v1/projects/${t.project}/alert-rules`, t.key);
    expect(listed.json().items).toHaveLength(100);

    const gone = listed.json().items[0].id;
    expect((await s.call("DELETE", `/api/v1/alert-rules/${gone}`, t.key)).statusCode).toBe(200);
    expect((await post(102)).statusCode).toBe(201);
    expect((await post(103)).statusCode).toBe(409);
  }, 120_000);

  it("the 101st key not revoked is refused with 409; a revoked key frees its place", async () => {
    const t = await tenant();
    const post = () =>
      s.call("POST", `/api/v1/projects/${t.project}/keys`, t.key, { scope: "report" });
    // The manage key is the first of 100.
    const made: string[] = [];
    for (let i = 0; i < 90; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, post));
      expect(statusesOf(batch)).toEqual({ 201: 10 });
      made.push(...batch.map((r) => r.json().key_id));
    }
    const racing = await Promise.all(Array.from({ length: 15 }, post));
    expect(statusesOf(racing)).toEqual({ 201: 9, 409: 6 });
    const refused = await post();
    expect(refused.json()).toMatchObject({ error: "conflict", limit: 100 });
    // The CLI is held to the same cap.
    const cli = await s.headroom(["keys", "create", "--project", t.project]);
    expect(cli.code).not.toBe(0);
    expect(cli.stderr).toContain("100");

    expect((await s.call("DELETE", `/api/v1/keys/${made[0]}`, t.key)).statusCode).toBe(200);
    expect((await post()).statusCode).toBe(201);
    expect((await post()).statusCode).toBe(409);
  }, 120_000);

  it("a plan sets its own caps (PLANS caps: keys 2, alert_rules 3)", async () => {
    const t = await tenant("tiny");
    const key = await s.call("POST", `/api/v1/projects/${t.project}/keys`, t.key, {});
    expect(key.statusCode, key.body).toBe(201);
    const third = await s.call("POST", `/api/v1/projects/${t.project}/keys`, t.key, {});
    expect(third.statusCode).toBe(409);
    expect(third.json()).toMatchObject({ error: "conflict", limit: 2 });
    for (let i = 0; i < 3; i++) {
      const r = await s.call("POST", `/api/v1/projects/${t.project}/alert-rules`, t.key, rule(i));
      expect(r.statusCode, r.body).toBe(201);
    }
    const fourth = await s.call("POST", `/api/v1/projects/${t.project}/alert-rules`, t.key, rule());
    expect(fourth.statusCode).toBe(409);
    expect(fourth.json()).toMatchObject({ error: "conflict", limit: 3 });
  });
});

/** Bytes Redis holds for this database's keys (MEMORY USAGE), the removed-rule memo aside. */
async function heldBytes(memo: string): Promise<number> {
  let total = 0;
  let cursor = "0";
  do {
    const [next, keys] = await s.redis.scan(cursor, "COUNT", 1000);
    cursor = next;
    for (const key of keys) {
      if (key === memo) continue;
      total += Number((await s.redis.memory("USAGE", key, "SAMPLES", 0)) ?? 0);
    }
  } while (cursor !== "0");
  return total;
}

describe("what one project's writes hold in Redis", () => {
  it("stays bounded however many writes it makes: rules at the cap, audit at its bound", async () => {
    const t = await tenant("tiny");
    const memo = `${s.p.config.QUEUE_PREFIX}:alert-rules-removed`;
    let writes = 0;
    /** Rules made to the cap and past it, each updated, each removed: 11 writes. */
    async function cycle() {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await s.call("POST", `/api/v1/projects/${t.project}/alert-rules`, t.key, rule(i));
        if (r.statusCode === 201) ids.push(r.json().id);
      }
      for (const id of ids) await s.call("PUT", `/api/v1/alert-rules/${id}`, t.key, rule(7));
      for (const id of ids) await s.call("DELETE", `/api/v1/alert-rules/${id}`, t.key);
      writes += 5 + 2 * ids.length;
    }
    for (let i = 0; i < 10; i++) await cycle();
    const first = await heldBytes(memo);
    const writesBefore = writes;
    for (let i = 0; i < 30; i++) await cycle();
    const second = await heldBytes(memo);
    expect(writes - writesBefore).toBeGreaterThanOrEqual(300);
    // Flat: what 300 more writes added is within a rounding of Redis's own structures.
    expect(second - first, `${first} -> ${second} bytes`).toBeLessThan(16 * 1024);
    const audit = await s.redis.zcard(`headroom:audit:${t.project}`);
    expect(audit).toBe(50);
    // The removed-rule memo is deployment-wide and bounded too (10,000 ids).
    expect(await s.redis.hlen(memo)).toBeLessThanOrEqual(10_000);
  }, 180_000);
});
