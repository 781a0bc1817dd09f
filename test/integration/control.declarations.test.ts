import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { backupRedis } from "../../src/cli/backup.js";
import { createDeclarationsReader } from "../../src/control/declarations-cache.js";
import { declarationKeys } from "../../src/control/declarations-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";
import { eventually } from "../helpers/eventually.js";

// A project's declared limits and pools through the real control plane (docs/control-plane.md):
// who may read and replace them, the 400s of bad bodies (never a 500), the audit log, the rate of
// writes, the bound of a body, and a worker's cached reader seeing a change.

let s: ControlStack;
/** An API on the same Redis whose control plane allows 5 writes a minute per key. */
let limited: Api;
let project: string;
const keys = {} as Record<"admin" | "manage" | "other" | "read" | "report", string>;

beforeAll(async () => {
  s = await startControlStack(6);
  limited = await createApi(
    { ...s.p.config, CONTROL_WRITES_PER_MIN_PER_KEY: 5, CONTROL_WRITES_PER_MIN_PER_PROJECT: 1_000 },
    createLogger("silent", "test"),
    { clickhouse: s.p.client },
  );
  project = `d-${s.tag}-a`;
  const other = `d-${s.tag}-b`;
  await s.control.createProject(s.cli, { project });
  await s.control.createProject(s.cli, { project: other });
  const make = async (p: string | null, scope: "report" | "read" | "manage" | "admin") =>
    (await s.control.createKey(s.cli, p, { scope })).key;
  keys.admin = await make(null, "admin");
  keys.manage = await make(project, "manage");
  keys.read = await make(project, "read");
  keys.report = await make(project, "report");
  keys.other = await make(other, "manage");
}, 120_000);

afterAll(async () => {
  await limited?.close();
  await s?.close();
});

/** The issue's example (docs/providers.md, "Declared limits"). */
const BEDROCK = {
  provider: "bedrock",
  model: "anthropic.claude-3-haiku",
  dimension: "requests",
  window: "1m",
  limit: 60,
};
const limitsUrl = (p = project) => `/api/v1/projects/${p}/limits`;
const poolsUrl = (p = project) => `/api/v1/projects/${p}/pools`;

/** A project of its own with a manage key, for a test that must start from nothing. */
async function tenant() {
  const p = `d-${s.tag}-${Math.random().toString(36).slice(2, 8)}`;
  await s.control.createProject(s.cli, { project: p });
  return { project: p, key: (await s.control.createKey(s.cli, p, { scope: "manage" })).key };
}

const bodyOf = (res: LightMyRequestResponse) => res.json() as Record<string, unknown>;

describe("who may read and replace a project's declarations", () => {
  it("an admin key and the project's manage key; PUT replaces the set and GET reads it back", async () => {
    const put = await s.call("PUT", limitsUrl(), keys.admin, { limits: [BEDROCK] });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json()).toEqual({ limits: [{ ...BEDROCK, pool: null }] });
    const got = await s.call("GET", limitsUrl(), keys.manage);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual({ limits: [{ ...BEDROCK, pool: null }] });

    const daily = { ...BEDROCK, window: "1d", limit: 10_000, pool: "bedrock-prod" };
    const own = await s.call("PUT", limitsUrl(), keys.manage, { limits: [daily] });
    expect(own.statusCode, own.body).toBe(200);
    expect((await s.call("GET", limitsUrl(), keys.admin)).json()).toEqual({ limits: [daily] });

    const pools = {
      pools: [{ provider: "openai", label: "openai-prod", apps: ["chat", "agent"] }],
    };
    expect((await s.call("PUT", poolsUrl(), keys.manage, pools)).statusCode).toBe(200);
    expect((await s.call("GET", poolsUrl(), keys.admin)).json()).toEqual(pools);
  });

  it("refuses another project's manage key (403), data keys (403) and no key (401), changing nothing", async () => {
    await s.call("PUT", limitsUrl(), keys.admin, { limits: [BEDROCK] });
    const before = await s.dump();
    for (const url of [limitsUrl(), poolsUrl()]) {
      const field = url.endsWith("limits") ? "limits" : "pools";
      for (const [key, status, code] of [
        [keys.other, 403, "insufficient_scope"],
        [keys.read, 403, "insufficient_scope"],
        [keys.report, 403, "insufficient_scope"],
        [undefined, 401, "missing_project_key"],
      ] as const) {
        for (const method of ["GET", "PUT"]) {
          const res = await s.call(
            method,
            url,
            key,
            method === "PUT" ? { [field]: [] } : undefined,
          );
          expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(status);
          expect(bodyOf(res).error).toBe(code);
        }
      }
    }
    expect(await s.dump()).toBe(before);
    expect((await s.call("GET", limitsUrl(), keys.admin)).json().limits).toHaveLength(1);
  });

  it("a project that does not exist is 404, for an admin key too", async () => {
    for (const method of ["GET", "PUT"]) {
      const res = await s.call(method, limitsUrl(`d-${s.tag}-none`), keys.admin, {
        limits: [],
      });
      expect(res.statusCode, res.body).toBe(404);
      expect(bodyOf(res).error).toBe("not_found");
    }
  });
});

describe("bad bodies", () => {
  const LIMIT_BODIES: [string, unknown][] = [
    ["a negative limit", { limits: [{ ...BEDROCK, limit: -60 }] }],
    ["a zero limit", { limits: [{ ...BEDROCK, limit: 0 }] }],
    ["a limit as text", { limits: [{ ...BEDROCK, limit: "60" }] }],
    ["an unknown window", { limits: [{ ...BEDROCK, window: "90s" }] }],
    ["an unknown dimension (unit)", { limits: [{ ...BEDROCK, dimension: "calls" }] }],
    ["an unknown field", { limits: [{ ...BEDROCK, per: "minute" }] }],
    ["a duplicate", { limits: [BEDROCK, { ...BEDROCK, limit: 70, pool: null }] }],
    [
      "201 limits",
      { limits: Array.from({ length: 201 }, (_, i) => ({ ...BEDROCK, model: `m-${i}` })) },
    ],
    ["no limits", {}],
    ["limits null", { limits: null }],
    ["an array", [BEDROCK]],
  ];
  it.each(LIMIT_BODIES)(
    "limits: %s is a 400 invalid_body naming the field",
    async (_name, body) => {
      const before = (await s.call("GET", limitsUrl(), keys.admin)).json();
      const res = await s.call("PUT", limitsUrl(), keys.manage, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: "invalid_body" });
      expect(res.json().issues.length).toBeGreaterThan(0);
      expect((await s.call("GET", limitsUrl(), keys.admin)).json()).toEqual(before);
    },
  );

  const pool = (label: string, apps: string[], provider = "openai") => ({ provider, label, apps });
  const POOL_BODIES: [string, unknown][] = [
    ["an app in two pools of one provider", { pools: [pool("a", ["chat"]), pool("b", ["chat"])] }],
    ["a label twice", { pools: [pool("a", ["chat"]), pool("a", ["rag"])] }],
    ["no apps", { pools: [pool("a", [])] }],
    ["a label with a space", { pools: [pool("a b", ["chat"])] }],
    ["101 pools", { pools: Array.from({ length: 101 }, (_, i) => pool(`p${i}`, [`a${i}`])) }],
    [
      "1,001 apps",
      {
        pools: Array.from({ length: 11 }, (_, i) =>
          pool(
            `p${i}`,
            Array.from({ length: 91 }, (_, j) => `a${i}-${j}`),
          ),
        ),
      },
    ],
  ];
  it.each(POOL_BODIES)("pools: %s is a 400 invalid_body", async (_name, body) => {
    const res = await s.call("PUT", poolsUrl(), keys.manage, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ error: "invalid_body" });
  });

  it("not JSON, or a __proto__ key, is a 400 invalid_json, never a 500", async () => {
    for (const payload of ['{"limits": [', '{"limits": [], "__proto__": {"x": 1}}']) {
      const res = await s.api.app.inject({
        method: "PUT",
        url: limitsUrl(),
        headers: { authorization: `Bearer ${keys.manage}`, "content-type": "application/json" },
        payload,
      });
      expect(res.statusCode, payload).toBe(400);
      expect(res.json().error).toBe("invalid_json");
    }
  });

  it("takes the largest valid bodies (over BODY_LIMIT_BYTES) and refuses one past 256 KiB with 413", async () => {
    const t = await tenant();
    const long = (c: string, n: number) => c.repeat(n);
    const limits = Array.from({ length: 200 }, (_, i) => ({
      provider: long("p", 32),
      model: `${long("m", 60)}${String(i).padStart(4, "0")}`,
      pool: long("l", 64),
      dimension: "output_tokens",
      window: "1mo",
      limit: 1e12,
    }));
    const pools = Array.from({ length: 100 }, (_, i) => ({
      provider: long("p", 32),
      label: `${long("l", 60)}${String(i).padStart(4, "0")}`,
      apps: Array.from(
        { length: 10 },
        (_, j) => `${long("a", 58)}${String(i * 10 + j).padStart(6, "0")}`,
      ),
    }));
    for (const [url, body] of [
      [limitsUrl(t.project), { limits }],
      [poolsUrl(t.project), { pools }],
    ] as const) {
      // Pretty-printed, as a file a person wrote.
      const text = JSON.stringify(body, null, 2);
      expect(text.length).toBeGreaterThan(s.p.config.BODY_LIMIT_BYTES);
      const res = await s.api.app.inject({
        method: "PUT",
        url,
        headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
        payload: text,
      });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    }
    const over = await s.api.app.inject({
      method: "PUT",
      url: limitsUrl(t.project),
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      payload: JSON.stringify({ limits: [], pad: "x".repeat(256 * 1024) }),
    });
    expect(over.statusCode).toBe(413);
  });
});

describe("the audit log", () => {
  it("names each change: who, the action, the counts, what left and what came; a PUT that changes nothing writes none", async () => {
    const t = await tenant();
    const first = await s.call("PUT", limitsUrl(t.project), t.key, { limits: [BEDROCK] });
    expect(first.statusCode).toBe(200);
    const daily = { ...BEDROCK, window: "1d", limit: 10_000 };
    await s.call("PUT", limitsUrl(t.project), keys.admin, { limits: [BEDROCK, daily] });
    await s.call("PUT", limitsUrl(t.project), t.key, { limits: [BEDROCK, daily] });
    await s.call("PUT", poolsUrl(t.project), t.key, {
      pools: [{ provider: "openai", label: "openai-prod", apps: ["chat"] }],
    });
    const audit = await s.call("GET", `/api/v1/audit?project=${t.project}`, keys.admin);
    const entries = (audit.json().items as Record<string, unknown>[]).filter((e) =>
      String(e.action).startsWith("declared_"),
    );
    expect(entries.map((e) => e.action)).toEqual([
      "declared_pools.set",
      "declared_limits.set",
      "declared_limits.set",
    ]);
    const [pools, second, made] = entries as [
      Record<string, unknown>,
      Record<string, unknown>,
      Record<string, unknown>,
    ];
    expect(made).toMatchObject({
      actor: { kind: "manage" },
      project: t.project,
      target: t.project,
      before: { count: 0, removed: [] },
      after: { count: 1, added: [{ ...BEDROCK, pool: null }] },
    });
    expect(second).toMatchObject({
      actor: { kind: "admin" },
      before: { count: 1, removed: [] },
      after: { count: 2, added: [{ ...daily, pool: null }] },
    });
    expect(pools).toMatchObject({
      after: { count: 1, added: [{ provider: "openai", label: "openai-prod", apps: ["chat"] }] },
    });
  });
});

describe("writes are control plane writes", () => {
  it("count against the key's writes a minute (429 with Retry-After); reads do not", async () => {
    const t = await tenant();
    const puts: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await limited.app.inject({
        method: "PUT",
        url: i % 2 ? poolsUrl(t.project) : limitsUrl(t.project),
        headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
        payload: JSON.stringify(
          i % 2 ? { pools: [] } : { limits: [{ ...BEDROCK, limit: 60 + i }] },
        ),
      });
      puts.push(res.statusCode);
      if (res.statusCode === 429) {
        expect(res.json().error).toBe("rate_limited");
        expect(Number(res.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      }
    }
    expect(puts).toEqual([200, 200, 200, 200, 200, 429, 429]);
    const read = await limited.app.inject({
      method: "GET",
      url: limitsUrl(t.project),
      headers: { authorization: `Bearer ${t.key}` },
    });
    expect(read.statusCode).toBe(200);
    expect(read.json().limits[0].limit).toBe(64);
  });
});

describe("where they are kept", () => {
  it("in one hash per project under the queue prefix, carried by a backup", async () => {
    const t = await tenant();
    await s.call("PUT", limitsUrl(t.project), t.key, { limits: [BEDROCK] });
    const key = declarationKeys(s.p.config.QUEUE_PREFIX).of(t.project);
    expect(JSON.parse((await s.redis.hget(key, "limits")) ?? "null")).toEqual([
      { ...BEDROCK, pool: null },
    ]);
    const backup = await backupRedis(s.redis, s.p.config.QUEUE_PREFIX);
    expect(backup.keys.find((e) => e.key === key)).toBeDefined();
    // Cleared: no hash left behind.
    await s.call("PUT", limitsUrl(t.project), t.key, { limits: [] });
    expect(await s.redis.exists(key)).toBe(0);
  });

  it("a process's cached reader sees a change once it checks the change log, and holds it", async () => {
    const t = await tenant();
    const { seq, changes } = declarationKeys(s.p.config.QUEUE_PREFIX);
    // A reader that checks the log at every ask (checkMs 0), and counts what it asks Redis.
    const asked: string[] = [];
    const counting = new Proxy(s.p.redis, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          asked.push(`${String(prop)} ${String(args[0])}`);
          return value.apply(target, args);
        };
      },
    });
    const reader = createDeclarationsReader(counting, s.p.config.QUEUE_PREFIX, { checkMs: 0 });
    expect(await reader.forProject(t.project)).toEqual({ limits: [], pools: [] });
    const pools = [{ provider: "openai", label: "openai-prod", apps: ["chat", "agent"] }];
    await s.call("PUT", poolsUrl(t.project), t.key, { pools });
    await eventually(async () => expect((await reader.forProject(t.project)).pools).toEqual(pools));
    await s.call("PUT", limitsUrl(t.project), t.key, { limits: [BEDROCK] });
    await eventually(async () =>
      expect(await reader.forProject(t.project)).toEqual({
        limits: [{ ...BEDROCK, pool: null }],
        pools,
      }),
    );
    // Nothing changes now: asks read the change log only (one command), never the project again.
    asked.length = 0;
    for (let i = 0; i < 20; i++) await reader.forProject(t.project);
    await eventually(() => expect(asked.length).toBeGreaterThan(0));
    expect(asked.every((a) => a === `zrangebyscore ${changes}` || a === `get ${seq}`)).toBe(true);
  });
});

describe("the OpenAPI document", () => {
  it("describes both routes from their schemas: the bounds and the shapes", async () => {
    const doc = (await s.call("GET", "/api/v1/openapi.json")).json();
    const put = doc.paths["/api/v1/projects/{project}/limits"].put;
    const schema = put.requestBody.content["application/json"].schema;
    expect(schema.properties.limits.maxItems).toBe(200);
    expect(schema.properties.limits.items.properties.window.enum).toEqual([
      "1s",
      "10s",
      "1m",
      "1h",
      "5h",
      "1d",
      "7d",
      "1mo",
    ]);
    expect(doc.paths["/api/v1/projects/{project}/pools"].put.requestBody).toBeDefined();
    expect(doc.paths["/api/v1/projects/{project}/pools"].get.responses["200"]).toBeDefined();
  });
});
