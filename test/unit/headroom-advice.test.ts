import { describe, expect, it } from "vitest";
import type { WindowNow } from "../../src/alerts/now-model.js";
import { type AdvisedPool, advise, judgePool } from "../../src/headroom/advice.js";
import { adviceMoment } from "../../src/headroom/advice-moment.js";

// Advice (src/headroom/advice.ts): go when every asked window has room, wait until the binding
// window's reset counted from the answer's moment, unknown with its reason, and alternatives.

const T = Date.UTC(2030, 5, 15, 12, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();

function win(
  dimension: string,
  limit: number,
  remaining: number,
  resetsAt: number | null,
  extra: Partial<WindowNow> = {},
) {
  return {
    dimension,
    window: "1m",
    limit,
    remaining,
    used_pct: (100 * (limit - remaining)) / limit,
    resets_at: resetsAt === null ? null : iso(resetsAt),
    resets_in_s: null,
    resets_unknown: null,
    reset_since_report: false,
    burn_per_s: null,
    burn: null,
    burn_unit: "tokens/s",
    burn_unknown: null,
    exhausted_at: null,
    exhaustion_eta_s: null,
    exhaustion_unknown: null,
    ...extra,
  } as WindowNow & { dimension: string; window: string | null };
}

function pool(
  id: string,
  windows: AdvisedPool["windows"],
  more: Partial<AdvisedPool> = {},
): AdvisedPool {
  return {
    pool: id,
    kind: "account",
    label: null,
    provider: "openai",
    model: "gpt-4o",
    status: "ok",
    members: [{ app: "chat" }],
    windows,
    requests: windows[0] as WindowNow,
    tokens: windows[0] as WindowNow,
    ...more,
  };
}

const ask = { provider: "openai", model: "gpt-4o", requests: 1, tokens: 0 };

describe("judgePool", () => {
  it("says go when every asked window has room", () => {
    const p = pool("a", [
      win("requests", 100, 5, T + 10_000),
      win("tokens", 10_000, 500, T + 5_000),
    ]);
    expect(judgePool(p, { requests: 1, tokens: 500 }, T)).toMatchObject({
      verdict: "go",
      retry_after_ms: null,
    });
  });

  it("says wait until the binding window's reset, counted from the answer's moment", () => {
    const p = pool("a", [
      win("requests", 100, 0, T + 10_000),
      win("tokens", 10_000, 400, T + 45_000),
    ]);
    const j = judgePool(p, { requests: 1, tokens: 500 }, T + 2_500);
    expect(j.verdict).toBe("wait");
    expect(j.retry_after_ms).toBe(42_500);
    expect(j.binding?.dimension).toBe("tokens");
    // Past the reset: 0, not negative.
    expect(judgePool(p, { requests: 1, tokens: 500 }, T + 60_000).retry_after_ms).toBe(0);
  });

  it("counts a window reset since its report as room, and does not judge credits", () => {
    const p = pool("a", [
      win("tokens", 10_000, 0, T - 1_000, { reset_since_report: true }),
      win("credits", 100, 0, null),
    ]);
    expect(judgePool(p, { requests: 1, tokens: 10 }, T).verdict).toBe("go");
  });

  it("is unknown with its reason: stale, no figures, no reset time", () => {
    expect(
      judgePool(pool("a", [win("tokens", 10, 10, null)], { status: "stale" }), ask, T),
    ).toMatchObject({
      verdict: "unknown",
      reason: "stale",
    });
    expect(judgePool(pool("a", [win("credits", 10, 0, null)]), ask, T)).toMatchObject({
      verdict: "unknown",
      reason: "no_figures",
    });
    expect(judgePool(pool("a", [win("requests", 10, 0, null)]), ask, T)).toMatchObject({
      verdict: "unknown",
      reason: "no_reset_time",
    });
  });
});

describe("advise", () => {
  it("is unknown (no_report) for a model never reported, and lists alternatives: same provider first, least used", () => {
    const pools = [
      pool("busy", [win("requests", 100, 10, T + 1_000)], { model: "gpt-4o-mini" }),
      pool("idle", [win("requests", 100, 90, T + 1_000)], { model: "gpt-4.1" }),
      pool("full", [win("requests", 100, 0, T + 1_000)], { model: "o3" }),
      pool("groq", [win("requests", 100, 99, T + 1_000)], { provider: "groq", model: "llama" }),
    ];
    const a = advise(pools, { ...ask, model: "gpt-5" }, T);
    expect(a.verdict).toBe("unknown");
    expect(a.reason).toBe("no_report");
    expect(a.pool).toBeNull();
    expect(a.alternatives.map((x) => x.pool)).toEqual(["idle", "busy", "groq"]);
  });

  it("judges the pool an app or a label names, and of several the one that holds back longest", () => {
    const pools = [
      pool("p1", [win("requests", 100, 50, T + 1_000)], { members: [{ app: "chat" }] }),
      pool("p2", [win("requests", 100, 0, T + 9_000)], {
        members: [{ app: "batch" }],
        label: "bulk",
        kind: "label",
      }),
    ];
    expect(advise(pools, { ...ask, app: "chat" }, T).verdict).toBe("go");
    expect(advise(pools, { ...ask, pool: "bulk" }, T)).toMatchObject({
      verdict: "wait",
      retry_after_ms: 9_000,
    });
    expect(advise(pools, ask, T).pool?.pool).toBe("p2");
  });
});

describe("adviceMoment", () => {
  it("holds views with a rolling counted window only until the next whole hour, when its oldest hour leaves", () => {
    const now = T + 20 * 60_000;
    const rolling = { ...win("requests", 100, 0, null), window: "5h", resets: "rolling" };
    const m = adviceMoment([{ view: pool("a", [rolling]), lastSeen: now }], now, 86_400_000);
    expect(m.until).toBe(T + 3_600_000);
    const fixed = win("requests", 100, 0, T + 2 * 3_600_000);
    expect(adviceMoment([{ view: pool("b", [fixed]), lastSeen: now }], now, 86_400_000).until).toBe(
      T + 2 * 3_600_000,
    );
  });
});
