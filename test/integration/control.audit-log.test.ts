import { hostname, userInfo } from "node:os";
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type AuditEntry, createAuditLog } from "../../src/control/audit.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";
import { uniqueId } from "../helpers/edge-fixture.js";

// The audit log in a real Redis: pages, newest first by (time, id), give every entry exactly
// once whatever the page size, entries of one millisecond included; entries older than the
// retention are gone; a project's log keeps its newest AUDIT_MAX_ENTRIES_PER_PROJECT. A clock is
// injected: no waiting. Through the control plane: a tenant's view of its log names the
// operator's actions "operator", nothing of who or where; the operator's view is whole.

let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});

afterAll(async () => {
  await redis?.quit();
});

const entry = (n: number) => ({
  actor: { key_id: null, kind: "cli" as const, user: "t" },
  source: "host",
  action: "key.create",
  project: "p",
  target: `key_${n}`,
  before: null,
  after: { n },
});

describe("audit log", () => {
  it("pages newest first, each entry once, whatever the page size (ties included)", async () => {
    await fc.assert(
      fc.asyncProperty(
        // Times within a few milliseconds: many entries share one.
        fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 7 }),
        async (offsets, limit) => {
          const prefix = `t-audit-${uniqueId()}`;
          let t = 0;
          const log = createAuditLog(redis, { retentionDays: 365, now: () => t, prefix });
          const base = Date.now();
          const written: { t: number; e: AuditEntry }[] = [];
          for (const [i, off] of offsets.entries()) {
            t = base + off;
            written.push({ t, e: await log.write(entry(i)) });
          }
          t = base + 10;
          const seen: AuditEntry[] = [];
          let after: { t: number; id: string } | undefined;
          for (let pages = 0; pages <= offsets.length; pages++) {
            const rows = await log.read({ project: "p", limit, after });
            const page = rows.slice(0, limit);
            seen.push(...page.map((r) => r.entry));
            const last = page.at(-1);
            if (rows.length <= limit || !last) break;
            after = { t: last.t, id: last.entry.id };
          }
          const expected = written
            .sort((a, b) => b.t - a.t || (b.e.id < a.e.id ? -1 : b.e.id > a.e.id ? 1 : 0))
            .map((w) => w.e);
          expect(seen).toEqual(expected);
          await redis.del(`${prefix}:audit`, `${prefix}:audit:p`);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("entries older than AUDIT_RETENTION_DAYS are removed", async () => {
    const prefix = `t-audit-${uniqueId()}`;
    const day = 86_400_000;
    let t = Date.now();
    const log = createAuditLog(redis, { retentionDays: 2, now: () => t, prefix });
    const old = await log.write(entry(1));
    t += day;
    const newer = await log.write(entry(2));
    t += day + 1;
    // The first is now older than two days; the second is not.
    const rows = await log.read({ limit: 10 });
    expect(rows.map((r) => r.entry.id)).toEqual([newer.id]);
    const ofProject = await log.read({ project: "p", limit: 10 });
    expect(ofProject.map((r) => r.entry.id)).toEqual([newer.id]);
    expect(await redis.zcard(`${prefix}:audit`)).toBe(1);
    expect(await redis.zcard(`${prefix}:audit:p`)).toBe(1);
    expect(old.id).not.toBe(newer.id);
    await redis.del(`${prefix}:audit`, `${prefix}:audit:p`);
  });

  it("a project's log keeps its newest entries past its bound, in the whole log too", async () => {
    const prefix = `t-audit-${uniqueId()}`;
    let t = Date.now();
    const log = createAuditLog(redis, {
      retentionDays: 365,
      maxPerProject: 10,
      now: () => t,
      prefix,
    });
    const other = await log.write({ ...entry(0), project: "q" });
    const written: AuditEntry[] = [];
    for (let i = 1; i <= 25; i++) {
      t += 1;
      written.push(await log.write(entry(i)));
    }
    const ofProject = await log.read({ project: "p", limit: 100 });
    expect(ofProject.map((r) => r.entry.id)).toEqual(
      written
        .slice(-10)
        .reverse()
        .map((e) => e.id),
    );
    // The whole log: the project's newest 10, and another project's entry kept.
    const whole = await log.read({ limit: 100 });
    expect(whole.map((r) => r.entry.id)).toEqual([
      ...written
        .slice(-10)
        .reverse()
        .map((e) => e.id),
      other.id,
    ]);
    await redis.del(`${prefix}:audit`, `${prefix}:audit:p`, `${prefix}:audit:q`);
  });
});

describe("a tenant's view of its audit log", () => {
  let s: ControlStack;

  beforeAll(async () => {
    s = await startControlStack(8);
  }, 120_000);

  afterAll(async () => {
    await s?.close();
  });

  it("names the operator's actions \"operator\" only; its own keys' by key id and address", async () => {
    const project = `c-${s.tag}`;
    // The operator: the CLI (its OS user, its host) and an admin key over HTTP (its id, address).
    await s.control.createProject(s.cli, { project });
    const manage = await s.control.createKey(s.cli, project, { scope: "manage" });
    const admin = await s.control.createKey(s.cli, null, { scope: "admin" });
    const byAdmin = await s.call("POST", `/api/v1/projects/${project}/keys`, admin.key, {});
    expect(byAdmin.statusCode, byAdmin.body).toBe(201);
    // The tenant's own key.
    const byTenant = await s.call("POST", `/api/v1/projects/${project}/keys`, manage.key, {});
    expect(byTenant.statusCode, byTenant.body).toBe(201);

    const seen = await s.call("GET", "/api/v1/audit?limit=500", manage.key);
    expect(seen.statusCode, seen.body).toBe(200);
    const items = seen.json().items as AuditEntry[];
    expect(items).toHaveLength(4);
    const own = items.filter((e) => e.actor.kind === "manage");
    expect(own).toEqual([
      expect.objectContaining({
        actor: { key_id: manage.key_id, kind: "manage" },
        source: "127.0.0.1",
        target: byTenant.json().key_id,
      }),
    ]);
    const operator = items.filter((e) => e.actor.kind !== "manage");
    expect(operator).toHaveLength(3);
    for (const e of operator) {
      expect(e.actor).toEqual({ key_id: null, kind: "operator" });
      expect(e.source).toBeNull();
    }
    // Nothing of who the operator is or where it acted from, anywhere in the answer.
    let user = "";
    try {
      user = userInfo().username;
    } catch {}
    expect(seen.body).not.toContain(admin.key_id);
    expect(seen.body).not.toContain(`"user"`);
    // As a JSON string: a short host name ("vm") may be part of a random key id.
    expect(seen.body).not.toContain(JSON.stringify(hostname()));
    if (user) expect(seen.body).not.toContain(`"${user}"`);

    // The operator's view of the same log is whole.
    const whole = await s.call("GET", `/api/v1/audit?project=${project}&limit=500`, admin.key);
    const full = whole.json().items as AuditEntry[];
    expect(full.map((e) => e.id)).toEqual(items.map((e) => e.id));
    expect(full.filter((e) => e.actor.kind === "cli")).toHaveLength(2);
    for (const e of full.filter((e) => e.actor.kind === "cli")) {
      expect(e.actor.user).toBeTruthy();
      expect(e.source).toBe(hostname());
    }
    expect(full.find((e) => e.actor.kind === "admin")).toMatchObject({
      actor: { key_id: admin.key_id, kind: "admin" },
      source: "127.0.0.1",
    });
  });
});
