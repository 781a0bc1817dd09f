import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { eventually } from "../helpers/eventually.js";
import { type OwnRedis, startOwnRedis } from "../helpers/own-redis.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";
import { redisEntries } from "../helpers/redis-text.js";

// Pools through the real edge, worker and read API (docs/pools.md): three apps calling one model
// through one OpenAI organisation are one pool with one figure — the newest report's, whatever
// order the reports arrive in — and the organisation's id is found in no Redis key or value, no
// ClickHouse table, no log line and no answer.

const ORG = "org-Zq8HvT3kLmNp0aBcDeFgHiJk";
const OPENAI_PROJECT = "proj_Xy12AbCdEfGhIjKl";
const SECRET = "integration-pool-secret-0123456789abcdef";
const lines: string[] = [];
let s: ReadStack;
// Redis of this file's own: "found in no Redis key or value" reads every key there is.
let redis: OwnRedis;
let keys: ProjectKeys;
let other: ProjectKeys;
const now = Date.now();
const iso = (agoMs: number) => new Date(now - agoMs).toISOString();

/** A gpt-4o report of `app` through the organisation, `remaining` tokens of 10,000 left. */
const report = (app: string, agoMs: number, remaining: number, extra: object = {}) => ({
  provider: "openai",
  model: "gpt-4o",
  app,
  timestamp: iso(agoMs),
  limits: { tokens_limit: 10_000, tokens_remaining: remaining },
  headers: {
    "OpenAI-Organization": ORG,
    "openai-project": OPENAI_PROJECT,
    "x-ratelimit-limit-tokens": "10000",
    "x-ratelimit-remaining-tokens": String(remaining),
    "x-ratelimit-reset-tokens": "30s",
  },
  ...extra,
});

interface Pool {
  pool: string;
  kind: string;
  label: string | null;
  provider: string;
  model: string | null;
  members: { app: string; key_id: string | null; last_seen: string }[];
  windows: { dimension: string; window: string | null; remaining: number | null }[];
  tokens: { remaining: number | null };
}

const pools = async (key: string, query = "group=pool") => {
  const res = await s.get(`/api/v1/headroom?${query}`, key);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { pools: Pool[] }).pools;
};

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  redis = await startOwnRedis();
  s = await startReadStack(
    { POOL_SECRET: SECRET, LOG_REQUESTS: "true", REDIS_URL: redis.url },
    { logger: createLogger("trace", "test", sink) },
  );
  keys = await s.project();
  other = await s.project();
  // Out of order: the newest (rag, 9,820 left) first, the oldest last.
  await s.send(keys.report, [
    report("rag", 1_000, 9_820),
    report("chat", 3_000, 9_822),
    report("agent", 5_000, 9_823),
  ]);
  // Another project under the same organisation, and one app of this project pooled by label.
  await s.send(other.report, [report("chat", 2_000, 9_000)]);
  await s.send(keys.report, [
    {
      provider: "groq",
      model: "llama-3.3-70b",
      app: "a",
      pool: "groq-prod",
      limits: { requests_limit: 100, requests_remaining: 90 },
    },
    {
      provider: "groq",
      model: "llama-3.3-70b",
      app: "b",
      pool: "groq-prod",
      limits: { requests_limit: 100, requests_remaining: 80 },
    },
    {
      provider: "groq",
      model: "llama-3.3-70b",
      app: "c",
      limits: { requests_limit: 100, requests_remaining: 70 },
    },
  ]);
  await s.stored(keys.project, 6);
  await s.stored(other.project, 1);
}, 120_000);

afterAll(async () => {
  await s?.close();
  await redis?.stop();
});

describe("pools in /api/v1/headroom", () => {
  it("three apps through one organisation are one pool: one figure, the newest report's", async () => {
    await eventually(async () => {
      const openai = (await pools(keys.read)).filter((p) => p.provider === "openai");
      expect(openai).toHaveLength(1);
      const [pool] = openai as [Pool];
      expect(pool.kind).toBe("account");
      expect(pool.label).toBeNull();
      expect(pool.pool).toMatch(/^[0-9a-f]{12}$/);
      expect(pool.members.map((m) => m.app)).toEqual(["rag", "chat", "agent"]);
      expect(pool.tokens.remaining).toBe(9_820);
      expect(
        pool.windows.find((w) => w.dimension === "tokens" && w.window === null)?.remaining ??
          pool.windows.find((w) => w.dimension === "tokens")?.remaining,
      ).toBe(9_820);
    });
    // The per-app view stays: three series, each its own app's last figure.
    const res = await s.get("/api/v1/headroom?group=app&provider=openai", keys.read);
    const series = (res.json() as { series: { app: string; tokens: { remaining: number } }[] })
      .series;
    expect(Object.fromEntries(series.map((x) => [x.app, x.tokens.remaining]))).toEqual({
      agent: 9_823,
      chat: 9_822,
      rag: 9_820,
    });
  });

  it("pools by label where the provider names no account, and keeps an unlabelled app alone", async () => {
    await eventually(async () => {
      const groq = (await pools(keys.read)).filter((p) => p.provider === "groq");
      expect(groq.map((p) => [p.kind, p.label, p.members.map((m) => m.app).sort()])).toEqual([
        ["label", "groq-prod", ["a", "b"]],
        ["app", null, ["c"]],
      ]);
    });
  });

  it("keeps another project's reports under the same organisation in a pool of its own", async () => {
    await eventually(async () => {
      const mine = (await pools(keys.read)).find((p) => p.provider === "openai");
      const theirs = await pools(other.read);
      expect(theirs).toHaveLength(1);
      expect(theirs[0]?.members.map((m) => m.app)).toEqual(["chat"]);
      expect(theirs[0]?.tokens.remaining).toBe(9_000);
      expect(theirs[0]?.pool).not.toBe(mine?.pool);
    });
  });

  it("finds the organisation's id in no Redis key or value, ClickHouse table, log line or answer", async () => {
    const found: string[] = [];
    const entries = await redisEntries(s.p.redis);
    // The search reads this stack's keys: the project is there, by name.
    expect(entries.some((e) => `${e.key}${e.value}`.includes(keys.project))).toBe(true);
    for (const { key, value } of entries)
      for (const secret of [ORG, OPENAI_PROJECT])
        if (key.includes(secret) || value.includes(secret)) found.push(`redis ${key}`);

    const tables = await s.sql<{ name: string }>(
      "SELECT name FROM system.tables WHERE database = {db:String}",
      { db: s.db },
    );
    expect(tables.length).toBeGreaterThan(5);
    for (const { name } of tables) {
      const rows = await s.sql<Record<string, unknown>>(`SELECT * FROM ${s.db}.\`${name}\``);
      const text = JSON.stringify(rows);
      for (const secret of [ORG, OPENAI_PROJECT])
        if (text.includes(secret)) found.push(`clickhouse ${name}`);
    }
    // The stored hash is there instead.
    const [stored] = await s.sql<{ account: string | null }>(
      `SELECT DISTINCT account FROM ${s.db}.reports WHERE project_id = {p:String} AND provider = 'openai'`,
      { p: keys.project },
    );
    expect(stored?.account).toMatch(/^[0-9a-f]{32}$/);

    for (const url of [
      "/api/v1/headroom",
      "/api/v1/reports",
      "/api/v1/usage",
      "/api/v1/metrics",
      "/api/v1/spend",
    ]) {
      const res = await s.get(url, keys.read);
      for (const secret of [ORG, OPENAI_PROJECT])
        if (res.body.includes(secret)) found.push(`answer ${url}`);
    }
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines)
      for (const secret of [ORG, OPENAI_PROJECT])
        if (line.includes(secret)) found.push(`log ${line.slice(0, 200)}`);
    expect(found).toEqual([]);
  });
});

describe("pools in /api/v1/metrics", () => {
  it("labels each member series with its pool's id (account or label); an app alone has none", async () => {
    const all = await eventually(async () => {
      const found = await pools(keys.read);
      expect(found).toHaveLength(3);
      return found;
    });
    const idOf = (provider: string, app: string) =>
      all.find((p) => p.provider === provider && p.members.some((m) => m.app === app))?.pool;
    const res = await s.get("/api/v1/metrics", keys.read);
    expect(res.statusCode, res.body).toBe(200);
    const status = res.body
      .split("\n")
      .filter((l) => l.startsWith("headroom_status{") && l.includes('status="ok"'));
    const poolOf = (app: string) => {
      const line = status.find((l) => l.includes(`app="${app}"`));
      expect(line, app).toBeDefined();
      return /pool="([^"]*)"/.exec(line as string)?.[1] ?? null;
    };
    for (const app of ["chat", "agent", "rag"]) expect(poolOf(app)).toBe(idOf("openai", app));
    expect(poolOf("chat")).toMatch(/^[0-9a-f]{12}$/);
    expect(poolOf("a")).toBe(idOf("groq", "a"));
    expect(poolOf("b")).toBe(idOf("groq", "a"));
    expect(poolOf("c")).toBeNull();
  });
});
