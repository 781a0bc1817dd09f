import { describe, expect, it } from "vitest";
import { AT, derive } from "../fixtures/providers/source.js";

// Cerebras's documented example: https://inference-docs.cerebras.ai/support/rate-limits
const DOCS_EXAMPLE = {
  "x-ratelimit-limit-requests-day": "1000000000",
  "x-ratelimit-limit-tokens-minute": "1000000000",
  "x-ratelimit-remaining-requests-day": "999997455",
  "x-ratelimit-remaining-tokens-minute": "999998298",
  "x-ratelimit-reset-requests-day": "33011.382867097855",
  "x-ratelimit-reset-tokens-minute": "11.382867097854614",
};

describe("cerebras parser", () => {
  it("reads requests per day and tokens per minute, resets in fractional seconds", () => {
    const d = derive("cerebras", DOCS_EXAMPLE);
    expect(d.parser).toBe("cerebras@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: "1d",
        limit: 1e9,
        remaining: 999_997_455,
        resets_at: AT + 33_011_383,
      },
      {
        dimension: "tokens",
        window: "1m",
        limit: 1e9,
        remaining: 999_998_298,
        resets_at: AT + 11_383,
      },
    ]);
  });
});
