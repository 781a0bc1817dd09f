import { describe, expect, it } from "vitest";
import {
  declaredLimitsBody,
  declaredPoolsBody,
  MAX_DECLARED_LIMITS,
  MAX_DECLARED_POOL_APPS,
  MAX_DECLARED_POOLS,
} from "../../src/control/schemas.js";

// The bodies of PUT /projects/{project}/limits and /pools: what a project may declare.

const limit = (over: Record<string, unknown> = {}) => ({
  provider: "bedrock",
  model: "anthropic.claude-3-haiku",
  dimension: "requests",
  window: "1m",
  limit: 60,
  ...over,
});

const issues = (r: {
  success: boolean;
  error?: { issues: { path: PropertyKey[]; message: string }[] };
}) => (r.error?.issues ?? []).map((i) => `${i.path.join(".")}: ${i.message}`);

describe("declared limits", () => {
  it("takes the issue's example and a set of different windows", () => {
    expect(declaredLimitsBody.safeParse({ limits: [limit()] }).success).toBe(true);
    const set = [limit(), limit({ window: "1d", limit: 10_000 }), limit({ pool: "prod" })];
    expect(declaredLimitsBody.safeParse({ limits: set }).success).toBe(true);
    expect(declaredLimitsBody.safeParse({ limits: [] }).success).toBe(true);
  });

  it("refuses a negative or zero limit, an unknown window or dimension, an unknown field", () => {
    for (const bad of [
      limit({ limit: -1 }),
      limit({ limit: 0 }),
      limit({ limit: 1.5 }),
      limit({ limit: "60" }),
      limit({ window: "2m" }),
      limit({ dimension: "credits" }),
      limit({ provider: "Bedrock" }),
      limit({ extra: 1 }),
    ]) {
      expect(declaredLimitsBody.safeParse({ limits: [bad] }).success, JSON.stringify(bad)).toBe(
        false,
      );
    }
  });

  it("refuses two limits of one provider, model, pool, dimension and window (null pool = none)", () => {
    const r = declaredLimitsBody.safeParse({
      limits: [limit({ pool: null }), limit({ limit: 70 })],
    });
    expect(issues(r)).toEqual([
      "limits.1: the same provider, model, pool, dimension and window as limits.0",
    ]);
  });

  it(`takes at most ${MAX_DECLARED_LIMITS} limits`, () => {
    expect(MAX_DECLARED_LIMITS).toBe(200);
    const many = (n: number) => Array.from({ length: n }, (_, i) => limit({ model: `m${i}` }));
    expect(declaredLimitsBody.safeParse({ limits: many(200) }).success).toBe(true);
    expect(declaredLimitsBody.safeParse({ limits: many(201) }).success).toBe(false);
  });
});

describe("declared pools", () => {
  const pool = (label: string, apps: string[], provider = "openai") => ({ provider, label, apps });

  it("takes pools of different providers that share an app", () => {
    const r = declaredPoolsBody.safeParse({
      pools: [pool("openai-prod", ["chat", "agent"]), pool("groq-prod", ["chat"], "groq")],
    });
    expect(r.success).toBe(true);
  });

  it("refuses an app in two pools of one provider, an app listed twice, a label used twice", () => {
    expect(
      issues(
        declaredPoolsBody.safeParse({ pools: [pool("a", ["chat"]), pool("b", ["agent", "chat"])] }),
      ),
    ).toEqual([
      "pools.1.apps.1: chat is in openai's pool pools.0 already: an app draws on one pool of a provider",
    ]);
    expect(issues(declaredPoolsBody.safeParse({ pools: [pool("a", ["chat", "chat"])] }))).toEqual([
      "pools.0.apps.1: chat is listed twice",
    ]);
    expect(
      issues(declaredPoolsBody.safeParse({ pools: [pool("a", ["chat"]), pool("a", ["rag"])] })),
    ).toEqual(["pools.1.label: pools.0 is openai's pool a already"]);
  });

  it(`takes at most ${MAX_DECLARED_POOLS} pools and ${MAX_DECLARED_POOL_APPS} apps in all`, () => {
    expect([MAX_DECLARED_POOLS, MAX_DECLARED_POOL_APPS]).toEqual([100, 1_000]);
    const pools = (n: number, each: number) =>
      Array.from({ length: n }, (_, i) =>
        pool(
          `p${i}`,
          Array.from({ length: each }, (_, j) => `a${i}-${j}`),
        ),
      );
    expect(declaredPoolsBody.safeParse({ pools: pools(100, 10) }).success).toBe(true);
    expect(declaredPoolsBody.safeParse({ pools: pools(101, 1) }).success).toBe(false);
    expect(issues(declaredPoolsBody.safeParse({ pools: pools(11, 91) }))).toEqual([
      "pools: 1001 apps across the pools: at most 1000",
    ]);
  });
});
