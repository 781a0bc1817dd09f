import { describe, expect, it } from "vitest";
import { parseDuration, parseRuleInput, RuleError, type RuleInput } from "../../src/alerts/rule.js";
import { createRuleCache } from "../../src/alerts/rule-cache.js";
import { duration, percent } from "../../src/cli/arg-parsers.js";

// Rule validation, as `alerts add` and the rule store apply it, and the per-project rule cache.

const base: RuleInput = {
  project: "acme",
  metric: "requests",
  warn_pct: 70,
  critical_pct: 90,
  webhook: "http://127.0.0.1:9999/hook",
};

describe("alert rule validation", () => {
  it("fills defaults: no filters, 5 points of hysteresis, 10 minutes of cooldown", () => {
    expect(parseRuleInput(base)).toEqual({
      ...base,
      provider: null,
      model: null,
      app: null,
      window: null,
      hysteresis_pct: 5,
      cooldown_s: 600,
    });
  });

  it("watches any dimension a provider's windows name, not only the contract's three", () => {
    for (const metric of ["requests", "input_tokens", "output_tokens", "unified_oi", "tokens_7d"])
      expect(parseRuleInput({ ...base, metric }).metric).toBe(metric);
    expect(parseRuleInput({ ...base, metric: "a".repeat(64) }).metric).toHaveLength(64);
  });

  it("lowercases the provider filter, as the edge stores providers", () => {
    expect(parseRuleInput({ ...base, provider: " OpenAI " }).provider).toBe("openai");
  });

  it.each([
    [{ warn_pct: 90, critical_pct: 90 }, /warn_pct: the warning threshold must be below/],
    [{ warn_pct: 0 }, /warn_pct: must be above 0/],
    [{ critical_pct: 101 }, /critical_pct: must be at most 100/],
    [{ metric: "Input-Tokens" }, /metric: must be a dimension/],
    [{ metric: "input tokens" }, /metric: must be a dimension/],
    [{ metric: "_tokens" }, /metric: must be a dimension/],
    [{ metric: "" }, /metric: must be a dimension/],
    [{ metric: `a${"_b".repeat(32)}` }, /metric: must be at most 64 characters/],
    [{ webhook: "ftp://x" }, /webhook: must be an http\(s\) URL/],
    [{ webhook: "not a url" }, /webhook/],
    [{ project: "  " }, /project: required/],
    [{ hysteresis_pct: 70 }, /hysteresis/],
    [{ cooldown_s: -1 }, /cooldown_s/],
  ])("refuses %j", (change, message) => {
    expect(() => parseRuleInput({ ...base, ...change })).toThrow(RuleError);
    expect(() => parseRuleInput({ ...base, ...change })).toThrow(message);
  });
});

describe("CLI value parsers for alerts", () => {
  it("durations", () => {
    expect(parseDuration("90s")).toBe(90);
    expect(parseDuration("10m")).toBe(600);
    expect(parseDuration("2h")).toBe(7_200);
    expect(parseDuration("1d")).toBe(86_400);
    expect(parseDuration("0")).toBe(0);
    expect(parseDuration("45")).toBe(45);
    expect(parseDuration("ten minutes")).toBeNull();
    expect(parseDuration("-5m")).toBeNull();
    expect(duration("10m")).toBe(600);
    expect(() => duration("10 minutes")).toThrow(/e\.g\. 90s, 10m/);
  });

  it("percentages", () => {
    expect(percent("70")).toBe(70);
    expect(percent("99.5%")).toBe(99.5);
    expect(() => percent("0")).toThrow();
    expect(() => percent("150")).toThrow();
    expect(() => percent("")).toThrow();
  });
});

describe("rule cache", () => {
  it("asks the store once per TTL, for the missing projects only, empty ones included", async () => {
    let now = 0;
    const asked: string[][] = [];
    const rule = { ...parseRuleInput(base), id: "alr_1", created_at: "x" };
    const cache = createRuleCache(
      {
        forProjects: async (projects) => {
          asked.push(projects);
          return new Map(projects.map((p) => [p, p === "acme" ? [rule] : []]));
        },
      },
      5_000,
      () => now,
    );
    expect((await cache.rulesFor(["acme", "other"])).get("acme")).toEqual([rule]);
    now = 4_999;
    expect((await cache.rulesFor(["acme", "other"])).get("other")).toEqual([]);
    await cache.rulesFor(["third", "acme"]);
    now = 5_000;
    await cache.rulesFor(["acme"]);
    expect(asked).toEqual([["acme", "other"], ["third"], ["acme"]]);
  });
});
