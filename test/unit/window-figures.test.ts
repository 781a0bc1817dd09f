import { describe, expect, it } from "vitest";
import { countReport, type HotCounts } from "../../src/alerts/counted-windows.js";
import type { LatestWindow } from "../../src/alerts/latest-window.js";
import { composeWindows } from "../../src/alerts/window-figures.js";

// A series' windows at an answer's moment: what the provider states, with the limit it does not
// state taken from a 429 (learned) or the project (declared), and where no remaining is stated,
// the reports counted against that limit.

const T = Date.UTC(2030, 0, 2, 12, 0, 30);
const counts = (n: number, at = T - 10_000): HotCounts => {
  const k: HotCounts = {};
  for (let i = 0; i < n; i++)
    countReport(k, { t: at, requests: 1, input_tokens: 100, output_tokens: 5 });
  return k;
};
const stated = (over: Partial<LatestWindow>): LatestWindow => ({
  dimension: "requests",
  window: "1m",
  limit: null,
  remaining: 40,
  reportedAt: T - 5_000,
  resetsAt: T + 30_000,
  points: [],
  ...over,
});
const declared = (dimension: string, window: "1s" | "1m" | "1d", limit: number) => ({
  dimension: dimension as "requests",
  window,
  limit,
});

describe("composeWindows", () => {
  it("takes a declared limit for a remaining the provider states (Azure): declared", () => {
    const [w] = composeWindows([stated({})], {
      provider: "azure-openai",
      declared: [declared("requests", "1m", 100)],
      counts: undefined,
      now: T,
    });
    expect(w).toMatchObject({ limit: 100, remaining: 40, source: "declared" });
  });

  it("keeps a stated limit over a declared one", () => {
    const [w] = composeWindows([stated({ limit: 60 })], {
      provider: "openai",
      declared: [declared("requests", "1m", 100)],
      counts: counts(3),
      now: T,
    });
    expect(w).toMatchObject({ limit: 60, remaining: 40 });
    expect(w?.source).toBeUndefined();
  });

  it("counts a declared window no report states (Bedrock), and says how it resets", () => {
    const [w] = composeWindows([], {
      provider: "bedrock",
      declared: [declared("requests", "1m", 60)],
      counts: counts(5),
      now: T,
    });
    expect(w).toEqual({
      dimension: "requests",
      window: "1m",
      source: "counted",
      limit: 60,
      remaining: 55,
      reportedAt: T - 10_000,
      resetsAt: Date.UTC(2030, 0, 2, 12, 1),
      points: [],
      resets: "utc_minute",
    });
  });

  it("counts a learned window once the 429's retry delay has passed, keeping where it was learned", () => {
    const learned = { limit: 250, at: T - 60_000, reportId: "r429" };
    const w429 = stated({
      window: "1d",
      limit: 250,
      remaining: 0,
      source: "learned",
      reportedAt: T - 60_000,
      resetsAt: T - 38_000,
      learned,
    });
    const [w] = composeWindows([w429], {
      provider: "gemini",
      declared: [],
      counts: counts(3),
      now: T,
    });
    expect(w).toMatchObject({
      source: "counted",
      limit: 250,
      remaining: 247,
      resets: "pacific_day",
      learned,
    });
    // Before the retry delay passed: the 429's 0.
    const [during] = composeWindows([w429], {
      provider: "gemini",
      declared: [],
      counts: counts(3),
      now: T - 40_000,
    });
    expect(during).toMatchObject({ source: "learned", remaining: 0, learned });
  });

  it("gives a declared window that cannot be counted its limit and no remaining", () => {
    const ws = composeWindows([], {
      provider: "bedrock",
      declared: [declared("requests", "1s", 5), declared("tokens", "1m", 1000)],
      counts: undefined,
      now: T,
    });
    expect(ws.map((w) => [w.window, w.source, w.limit, w.remaining])).toEqual([
      ["1s", "declared", 5, null],
      ["1m", "declared", 1000, null],
    ]);
  });

  it("states nothing for a series with nothing stated, learned or declared (DeepSeek)", () => {
    expect(
      composeWindows([], { provider: "deepseek", declared: [], counts: counts(9), now: T }),
    ).toEqual([]);
  });
});
