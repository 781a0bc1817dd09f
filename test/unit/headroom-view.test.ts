import { describe, expect, it } from "vitest";
import { countReport, type HotCounts } from "../../src/alerts/counted-windows.js";
import {
  type LatestFigures,
  type LatestWindow,
  seriesView,
} from "../../src/headroom/headroom-view.js";

// The headline `requests` and `tokens` of a series view (issue 45): the contract's six fields
// when they say something, else the series' most used window of that metric, saying which and
// where its figures come from.

const T0 = Date.UTC(2030, 0, 2, 12, 0, 0);
const NONE = { limit: null, remaining: null, resetMs: null };
const NO_POINTS = { requests: [], tokens: [], credits: [] };

function latest(more: Partial<LatestFigures>): LatestFigures {
  return {
    provider: "bedrock",
    model: "anthropic.claude-3-haiku",
    app: "bed",
    lastSeen: T0,
    limitsAt: T0,
    creditsAt: null,
    requests: NONE,
    tokens: NONE,
    credits: { limit: null, remaining: null },
    ...more,
  };
}

const stated = (
  dimension: string,
  window: LatestWindow["window"],
  limit: number | null,
  remaining: number | null,
  resetsAt: number | null = T0 + 60_000,
): LatestWindow => ({
  dimension,
  window,
  limit,
  remaining,
  reportedAt: T0,
  resetsAt,
  points: [],
});

describe("a series' headline requests and tokens", () => {
  it("is its counted window when the contract's fields say nothing: Bedrock's declared 60 a minute, 12 reported", () => {
    const counts: HotCounts = {};
    for (let i = 0; i < 12; i++)
      countReport(counts, {
        t: T0 + i * 1_000,
        requests: 1,
        input_tokens: null,
        output_tokens: null,
      });
    const view = seriesView(latest({ counts }), NO_POINTS, [], {
      now: T0 + 30_000,
      staleAfterMs: 900_000,
      declared: [{ dimension: "requests", window: "1m", limit: 60 }],
    });
    expect(view.requests).toMatchObject({
      limit: 60,
      remaining: 48,
      used_pct: 20,
      resets_at: new Date(T0 + 60_000).toISOString(),
      source: "counted",
      dimension: "requests",
      window: "1m",
    });
    // No window of tokens: the headline says nothing, and names no source.
    expect(view.tokens).toMatchObject({ limit: null, remaining: null, used_pct: null });
    expect(view.tokens).not.toHaveProperty("source");
    // The headline is a window's figures, not a second opinion of them.
    const { learned_from: _l, resets: _r, reported_at: _a, ...window } = view.windows[0] ?? {};
    expect(view.requests).toEqual(window);
  });

  it("is the most used window of the metric: Anthropic's output tokens, not a reset one", () => {
    const view = seriesView(
      latest({
        provider: "anthropic",
        model: "claude-sonnet-4",
        windows: [
          stated("requests", "1m", 50, 40),
          stated("input_tokens", "1m", 40_000, 30_000),
          stated("output_tokens", "1m", 8_000, 95),
          // Used up, but reset since its report: least of all.
          stated("tokens", "1d", 1_000_000, 0, T0 + 5_000),
        ],
      }),
      NO_POINTS,
      [],
      { now: T0 + 10_000, staleAfterMs: 900_000 },
    );
    expect(view.requests).toMatchObject({
      limit: 50,
      remaining: 40,
      used_pct: 20,
      source: "stated",
      dimension: "requests",
      window: "1m",
    });
    expect(view.tokens).toMatchObject({
      limit: 8_000,
      remaining: 95,
      used_pct: 98.81,
      source: "stated",
      dimension: "output_tokens",
      window: "1m",
    });
  });

  it("stays the contract's figures when they say something, with no source", () => {
    const view = seriesView(
      latest({
        provider: "openai",
        requests: { limit: 500, remaining: 499, resetMs: 60_000 },
        tokens: { limit: 30_000, remaining: 1_000, resetMs: 60_000 },
        windows: [stated("requests", "1d", 10_000, 100)],
      }),
      NO_POINTS,
      [],
      { now: T0 + 1_000, staleAfterMs: 900_000 },
    );
    expect(view.requests).toMatchObject({ limit: 500, remaining: 499 });
    expect(view.requests).not.toHaveProperty("source");
    expect(view.tokens).toMatchObject({ limit: 30_000, remaining: 1_000 });
    expect(view.tokens).not.toHaveProperty("window");
  });
});
