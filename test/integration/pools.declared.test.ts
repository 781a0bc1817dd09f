import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Declared pools through the real edge, worker and read API (docs/pools.md, step 3): the real
// client library sends neither an account's headers nor a `pool`, so a project declares over the
// control plane which apps share a provider's limit; their reports then draw on one pool, as if
// each client had sent its label. A report that names an account or a pool keeps it.

let s: ReadStack;
let keys: ProjectKeys;
let manage: string;
const now = Date.now();
const iso = (agoMs: number) => new Date(now - agoMs).toISOString();

/** A gpt-4o report as the real client library sends it: no headers, no pool. */
const report = (app: string, agoMs: number, remaining: number, extra: object = {}) => ({
  provider: "openai",
  model: "gpt-4o",
  app,
  timestamp: iso(agoMs),
  limits: { tokens_limit: 10_000, tokens_remaining: remaining },
  ...extra,
});

interface Pool {
  pool: string;
  kind: string;
  label: string | null;
  provider: string;
  members: { app: string }[];
  tokens: { remaining: number | null };
}

const pools = async (provider: string, read = keys.read) => {
  const res = await s.get(`/api/v1/headroom?group=pool&provider=${provider}`, read);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { pools: Pool[] }).pools;
};

const manageKey = async (project: string) =>
  (await s.edge.keyStore.create(project, { defaultPlan: "unlimited", scope: "manage" })).key;

const putPools = async (body: unknown, project = keys.project, key = manage) => {
  const res = await s.api.app.inject({
    method: "PUT",
    url: `/api/v1/projects/${project}/pools`,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBe(200);
};

const poolColumn = async (id: string) =>
  (
    await s.sql<{ pool: string | null }>(
      `SELECT pool FROM ${s.db}.reports WHERE report_id = {id:UUID}`,
      { id },
    )
  )[0]?.pool;

beforeAll(async () => {
  s = await startReadStack({ CONTROL_LISTEN: "api" });
  keys = await s.project();
  manage = await manageKey(keys.project);
  await putPools({
    pools: [{ provider: "openai", label: "openai-prod", apps: ["chat", "agent", "batch"] }],
  });
  await s.send(keys.report, [
    // Out of order: agent's is the newest.
    report("chat", 3_000, 9_822),
    report("agent", 1_000, 9_700),
    report("chat", 5_000, 9_900),
    // An app of no declared pool stays alone.
    report("rag", 2_000, 9_500),
    // A client's own label wins over the declaration.
    report("batch", 4_000, 8_000, { pool: "batch-own" }),
    // Declared for openai only: chat on groq is chat alone.
    {
      provider: "groq",
      model: "llama-3.3-70b",
      app: "chat",
      limits: { requests_limit: 100, requests_remaining: 90 },
    },
  ]);
  await s.stored(keys.project, 6);
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe("a declared pool", () => {
  it("puts two apps whose reports name no pool in one pool of /headroom, with the newest figure", async () => {
    await eventually(async () => {
      const openai = await pools("openai");
      const declared = openai.filter((p) => p.label === "openai-prod");
      expect(declared).toHaveLength(1);
      const [pool] = declared as [Pool];
      expect(pool.kind).toBe("label");
      expect(pool.members.map((m) => m.app).sort()).toEqual(["agent", "chat"]);
      expect(pool.tokens.remaining).toBe(9_700);
    });
  });

  it("leaves an app of no pool alone, keeps a client's own label, and holds for its provider only", async () => {
    await eventually(async () => {
      const openai = await pools("openai");
      expect(
        openai.map((p) => [p.kind, p.label, p.members.map((m) => m.app).sort()]).sort(),
      ).toEqual([
        ["app", null, ["rag"]],
        ["label", "batch-own", ["batch"]],
        ["label", "openai-prod", ["agent", "chat"]],
      ]);
      const groq = await pools("groq");
      expect(groq.map((p) => [p.kind, p.label])).toEqual([["app", null]]);
    });
  });

  it("is written in the stored row, as if the client had sent the label", async () => {
    const rows = await s.sql<{ app: string; pool: string | null; n: string }>(
      `SELECT app, pool, count() AS n FROM ${s.db}.reports
        WHERE project_id = {p:String} AND provider = 'openai' GROUP BY app, pool ORDER BY app, pool`,
      { p: keys.project },
    );
    expect(rows.map((r) => [r.app, r.pool, Number(r.n)])).toEqual([
      ["agent", "openai-prod", 1],
      ["batch", "batch-own", 1],
      ["chat", "openai-prod", 2],
      ["rag", null, 1],
    ]);
  });

  it("labels both members' series with one pool id in /api/v1/metrics", async () => {
    const id = await eventually(async () => {
      const found = (await pools("openai")).find((p) => p.label === "openai-prod");
      expect(found).toBeDefined();
      return found?.pool;
    });
    const res = await s.get("/api/v1/metrics", keys.read);
    const status = res.body
      .split("\n")
      .filter((l) => l.startsWith("headroom_status{") && l.includes('provider="openai"'));
    const poolOf = (app: string) =>
      status
        .filter((l) => l.includes(`app="${app}"`))
        .map((l) => /pool="([^"]*)"/.exec(l)?.[1] ?? null);
    expect(poolOf("agent")).toContain(id);
    expect(poolOf("chat")).toContain(id);
  });

  it("a changed declaration places the next reports, within the worker's check of changes", async () => {
    // A project of its own: its first declaration is the one the worker holds when it changes.
    const c = await s.project();
    const key = await manageKey(c.project);
    const openaiProd = (apps: string[]) => ({
      pools: [{ provider: "openai", label: "openai-prod", apps }],
    });
    await putPools(openaiProd(["chat"]), c.project, key);
    await s.send(c.report, [report("chat", 3_000, 9_000), report("rag", 2_000, 9_100)]);
    await s.stored(c.project, 2);
    await putPools(openaiProd(["chat", "rag"]), c.project, key);
    // Reports of rag until one lands in the pool: the worker checks for changes once a second.
    let ago = 900;
    await eventually(
      async () => {
        ago -= 1;
        const [id] = await s.send(c.report, [report("rag", ago, 9_400)]);
        await eventually(async () => expect(await poolColumn(id as string)).not.toBeUndefined(), {
          timeoutMs: 20_000,
        });
        expect(await poolColumn(id as string)).toBe("openai-prod");
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await eventually(async () => {
      const found = await pools("openai", c.read);
      expect(found.map((p) => [p.label, p.members.map((m) => m.app).sort()])).toEqual([
        ["openai-prod", ["chat", "rag"]],
      ]);
    });
  }, 60_000);
});
