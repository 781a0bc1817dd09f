import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// /api/v1/usage?group_by=pool through the real edge, worker, ClickHouse rollups (migration 12's
// pool rollups) and read API (docs/pools.md): three apps sharing a pool label are one pool per
// bucket, with the figures per-series usage gives them summed as a grouping sums (reports, cost,
// the lowest remaining), its id the one /headroom gives, its members the apps that reported into
// it; an app that joins the pool later counts alone before and in the pool after; an account's
// pool is named by id only; the default answer is unchanged.

const SECRET = "integration-pool-secret-0123456789abcdef";
const ORG = "org-UsagePools0123456789ab";
let s: ReadStack;
let keys: ProjectKeys;
let other: ProjectKeys;
/** Two whole minutes, ten minutes ago: every report lands in one of them. */
const M1 = Math.floor(Date.now() / 60_000) * 60_000 - 10 * 60_000;
const M2 = M1 + 60_000;
const RANGE = `from=${new Date(M1).toISOString()}&to=${new Date(M2 + 60_000).toISOString()}&window=minute`;

const report = (app: string, at: number, remaining: number, extra: object = {}) => ({
  provider: "openai",
  model: "gpt-4o",
  app,
  timestamp: new Date(at).toISOString(),
  limits: { requests_limit: 500, requests_remaining: remaining },
  credits: { credits_limit: null, credits_remaining: null, request_cost: 0.25 },
  ...extra,
});

interface Point {
  bucket: string;
  provider?: string;
  model?: string | null;
  pool?: string;
  kind?: string;
  label?: string | null;
  members?: string[];
  app?: string;
  reports: number;
  requests_remaining_min: number | null;
  requests_limit_max: number | null;
  cost: number;
  used_pct_max: number | null;
}

const usage = async (key: string, query: string) => {
  const res = await s.get(`/api/v1/usage?${RANGE}&${query}`, key);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { group_by: string[]; points: Point[] };
};

beforeAll(async () => {
  s = await startReadStack({ POOL_SECRET: SECRET });
  keys = await s.project();
  other = await s.project();
  const shared = { pool: "openai-shared" };
  await s.send(keys.report, [
    // The first minute: three apps of the label, and `late` alone (no label yet).
    report("chat", M1 + 5_000, 480, shared),
    report("agent", M1 + 10_000, 470, shared),
    report("rag", M1 + 15_000, 490, shared),
    report("rag", M1 + 20_000, 460, shared),
    report("late", M1 + 25_000, 450),
    // The second minute: `late` joins the label; chat again.
    report("late", M2 + 5_000, 440, shared),
    report("chat", M2 + 10_000, 430, shared),
    // An organisation's pool: named by id and kind, its account never.
    report("batch", M1 + 30_000, 300, {
      model: "gpt-4o-mini",
      headers: { "openai-organization": ORG, "x-ratelimit-remaining-requests": "300" },
    }),
  ]);
  // Another project with the same label: a pool of its own.
  await s.send(other.report, [report("chat", M1 + 5_000, 100, shared)]);
  await s.stored(keys.project, 8);
  await s.stored(other.project, 1);
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe("GET /api/v1/usage?group_by=pool", () => {
  it("answers one point per pool and bucket with the figures per-series usage gives its members", async () => {
    const byPool = await eventually(async () => {
      const u = await usage(keys.read, "group_by=pool&model=gpt-4o");
      expect(u.points).toHaveLength(3);
      return u;
    });
    expect(byPool.group_by).toEqual(["pool"]);
    const perSeries = (await usage(keys.read, "group_by=provider,model,app&model=gpt-4o")).points;
    const inBucket = (at: number, apps: string[]) =>
      perSeries.filter((p) => Date.parse(p.bucket) === at && apps.includes(p.app ?? ""));

    const label = byPool.points.filter((p) => p.kind === "label");
    expect(label.map((p) => [Date.parse(p.bucket), p.label, p.members])).toEqual([
      [M1, "openai-shared", ["agent", "chat", "rag"]],
      [M2, "openai-shared", ["chat", "late"]],
    ]);
    for (const [at, apps] of [
      [M1, ["agent", "chat", "rag"]],
      [M2, ["chat", "late"]],
    ] as const) {
      const point = label.find((p) => Date.parse(p.bucket) === at) as Point;
      const members = inBucket(at, [...apps]);
      expect(members).toHaveLength(apps.length);
      expect(point.reports).toBe(members.reduce((n, p) => n + p.reports, 0));
      expect(point.cost).toBeCloseTo(
        members.reduce((n, p) => n + p.cost, 0),
        9,
      );
      expect(point.requests_remaining_min).toBe(
        Math.min(...members.map((p) => p.requests_remaining_min as number)),
      );
      expect(point.requests_limit_max).toBe(500);
      expect(point.used_pct_max).toBe(Math.max(...members.map((p) => p.used_pct_max as number)));
      expect(point.provider).toBe("openai");
      expect(point.model).toBe("gpt-4o");
    }
    expect(label.map((p) => [p.reports, p.requests_remaining_min])).toEqual([
      [4, 460],
      [2, 430],
    ]);
    // `late` before it sent the label: its app's pool, alone.
    const alone = byPool.points.filter((p) => p.kind === "app");
    expect(alone.map((p) => [Date.parse(p.bucket), p.members, p.label, p.reports])).toEqual([
      [M1, ["late"], null, 1],
    ]);
    expect(new Set(byPool.points.map((p) => p.pool)).size).toBe(2);
  });

  it("names each pool by the id /headroom gives it, and an account's pool by id only", async () => {
    const byPool = await eventually(async () => {
      const u = await usage(keys.read, "group_by=pool");
      expect(u.points.some((p) => p.kind === "account")).toBe(true);
      return u;
    });
    const res = await s.get("/api/v1/headroom?group=pool", keys.read);
    const pools = (res.json() as { pools: { pool: string; kind: string; label: string | null }[] })
      .pools;
    const headroomIds = (kind: string) => pools.filter((p) => p.kind === kind).map((p) => p.pool);
    const usageIds = (kind: string) => [
      ...new Set(byPool.points.filter((p) => p.kind === kind).map((p) => p.pool)),
    ];
    expect(usageIds("label")).toEqual(headroomIds("label"));
    expect(usageIds("account")).toEqual(headroomIds("account"));
    const account = byPool.points.find((p) => p.kind === "account") as Point;
    expect(account).toMatchObject({ model: "gpt-4o-mini", label: null, members: ["batch"] });
    expect(account.pool).toMatch(/^[0-9a-f]{12}$/);
    const stored = await s.sql<{ account: string }>(
      `SELECT DISTINCT account FROM ${s.db}.reports WHERE project_id = {p:String} AND account IS NOT NULL`,
      { p: keys.project },
    );
    const body = JSON.stringify(byPool);
    expect(body).not.toContain(ORG);
    expect(body).not.toContain(stored[0]?.account ?? "no account stored");
  });

  it("with app too, answers each member apart within its pool", async () => {
    const u = await eventually(async () => {
      const u = await usage(keys.read, "group_by=pool,app&model=gpt-4o");
      expect(u.points).toHaveLength(6);
      return u;
    });
    expect(u.group_by).toEqual(["pool", "app"]);
    expect(
      u.points
        .filter((p) => Date.parse(p.bucket) === M1)
        .map((p) => [p.kind, p.app, p.members, p.reports]),
    ).toEqual([
      // By pool (its key as ClickHouse sorts it: 'app:late' before 'l:openai-shared'), then app.
      ["app", "late", ["late"], 1],
      ["label", "agent", ["agent"], 1],
      ["label", "chat", ["chat"], 1],
      ["label", "rag", ["rag"], 2],
    ]);
  });

  it("keeps another project's pool of the same label apart", async () => {
    const mine = await usage(keys.read, "group_by=pool&model=gpt-4o");
    const theirs = await eventually(async () => {
      const u = await usage(other.read, "group_by=pool");
      expect(u.points).toHaveLength(1);
      return u;
    });
    expect(theirs.points[0]).toMatchObject({
      label: "openai-shared",
      members: ["chat"],
      reports: 1,
      requests_remaining_min: 100,
    });
    // Neither counts the other's reports (a pool's id is its provider's, model's and label's, so
    // the same label gives the same id in each project, as /headroom's does).
    expect(mine.points.find((p) => p.kind === "label")).toMatchObject({
      members: ["agent", "chat", "rag"],
      reports: 4,
      requests_remaining_min: 460,
    });
  });

  it("answers CSV with the pool's id, kind and label as columns", async () => {
    const res = await s.get(
      `/api/v1/usage?${RANGE}&group_by=pool&model=gpt-4o&format=csv`,
      keys.read,
    );
    expect(res.statusCode).toBe(200);
    const [header, ...lines] = res.body.trim().split("\r\n");
    expect(header?.split(",").slice(0, 7)).toEqual([
      "bucket",
      "provider",
      "model",
      "pool",
      "kind",
      "label",
      "reports",
    ]);
    expect(lines).toHaveLength(3);
    expect(lines.filter((l) => l.includes(",label,openai-shared,"))).toHaveLength(2);
  });

  it("answers the polled last 24 h by pool as it answers the range", async () => {
    const ranged = await usage(keys.read, "group_by=pool&model=gpt-4o");
    const res = await s.get("/api/v1/usage?window=minute&group_by=pool&model=gpt-4o", keys.read);
    expect(res.statusCode, res.body).toBe(200);
    const polled = (res.json() as { points: Point[] }).points.filter(
      (p) => Date.parse(p.bucket) >= M1 && Date.parse(p.bucket) <= M2,
    );
    expect(polled).toEqual(ranged.points);
  });

  it("keeps the default answer unchanged: no pool fields without group_by=pool", async () => {
    const u = await usage(keys.read, "model=gpt-4o");
    expect(u.group_by).toEqual([]);
    expect(
      u.points.map((p) => Object.keys(p).filter((k) => /pool|kind|label|members/.test(k))),
    ).toEqual(u.points.map(() => []));
    expect(u.points.map((p) => p.reports)).toEqual([5, 2]);
  });

  it("refuses an unknown group, and a group named twice", async () => {
    for (const q of ["group_by=pools", "group_by=pool,pool", "group_by=pool&group_by=pool"]) {
      const res = await s.get(`/api/v1/usage?${q}`, keys.read);
      expect(res.statusCode, q).toBe(400);
    }
  });
});
