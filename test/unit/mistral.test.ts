import { describe, expect, it } from "vitest";
import { MISTRAL_CURRENT } from "../fixtures/providers/documented.js";
import { AT, derive, windowOf } from "../fixtures/providers/source.js";

// Mistral's limits (per minute and per month): https://docs.mistral.ai/deployment/ai-studio/tier
// The header names and values are from answers: the current generation as shown in
// mistralai/client-ts#169 (with the month window its names follow), the older "bysize" one as
// recorded from api.mistral.ai in 2025.

describe("mistral parser", () => {
  it("reads the current headers: requests and tokens per minute, tokens per month", () => {
    const d = derive("mistral", MISTRAL_CURRENT);
    expect(d.parser).toBe("mistral@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      {
        dimension: "tokens",
        window: "1m",
        limit: 5_000_000,
        remaining: 4_999_911,
        resets_at: null,
      },
      { dimension: "requests", window: "1m", limit: 720, remaining: 717, resets_at: null },
      {
        dimension: "tokens",
        window: "1mo",
        limit: 1_000_000_000,
        remaining: 999_967_993,
        resets_at: null,
      },
    ]);
  });

  it("reads the older ratelimitbysize headers, the month window included", () => {
    const d = derive("mistralai", {
      "x-ratelimitbysize-remaining-minute": "467993",
      "ratelimitbysize-query-cost": "32007",
      "ratelimitbysize-limit": "500000",
      "ratelimitbysize-reset": "40",
      "x-ratelimitbysize-limit-month": "1000000000",
      "ratelimitbysize-remaining": "467993",
      "x-ratelimitbysize-limit-minute": "500000",
      "x-ratelimitbysize-remaining-month": "999967993",
    });
    expect(windowOf(d, "tokens", "1m")).toEqual({
      dimension: "tokens",
      window: "1m",
      limit: 500_000,
      remaining: 467_993,
      resets_at: AT + 40_000,
    });
    expect(windowOf(d, "tokens", "1mo")).toEqual({
      dimension: "tokens",
      window: "1mo",
      limit: 1_000_000_000,
      remaining: 999_967_993,
      resets_at: null,
    });
    expect(d.windows).toHaveLength(2);
  });
});
