import { describe, expect, it } from "vitest";
import { AT, derive, NO_LIMITS, windowOf } from "../fixtures/providers/source.js";

// OpenAI's documented sample values:
// https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers
const DOCS_EXAMPLE = {
  "x-ratelimit-limit-requests": "60",
  "x-ratelimit-limit-tokens": "150000",
  "x-ratelimit-remaining-requests": "59",
  "x-ratelimit-remaining-tokens": "149984",
  "x-ratelimit-reset-requests": "1s",
  "x-ratelimit-reset-tokens": "6m0s",
};

describe("openai parser", () => {
  it("reads the documented example as per-minute request and token windows", () => {
    const d = derive("openai", DOCS_EXAMPLE);
    expect(d.parser).toBe("openai@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: 60, remaining: 59, resets_at: AT + 1000 },
      {
        dimension: "tokens",
        window: "1m",
        limit: 150_000,
        remaining: 149_984,
        resets_at: AT + 360_000,
      },
    ]);
  });

  it("keeps OpenAI's other token counts as their own dimension", () => {
    // https://community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905
    const d = derive("openai", {
      "x-ratelimit-limit-tokens_usage_based": "160000",
      "x-ratelimit-remaining-tokens_usage_based": "159976",
      "x-ratelimit-reset-tokens_usage_based": "9ms",
    });
    expect(windowOf(d, "tokens_usage_based")).toEqual({
      dimension: "tokens_usage_based",
      window: "1m",
      limit: 160_000,
      remaining: 159_976,
      resets_at: AT + 9,
    });
  });

  it("takes the headers' figures over the client's six fields, which fill only uncovered dimensions", () => {
    const d = derive(
      "openai",
      {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "59",
      },
      {
        limits: {
          ...NO_LIMITS,
          requests_limit: 1,
          requests_remaining: 1,
          tokens_limit: 500,
          tokens_remaining: 400,
          reset_tokens_ms: 250,
        },
        credits: { credits_limit: 10, credits_remaining: 4 },
      },
    );
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: 60, remaining: 59, resets_at: null },
      { dimension: "tokens", window: null, limit: 500, remaining: 400, resets_at: AT + 250 },
      { dimension: "credits", window: null, limit: 10, remaining: 4, resets_at: null },
    ]);
  });

  it("warns when remaining exceeds limit, keeping both as the provider stated them", () => {
    const d = derive("openai", {
      "x-ratelimit-limit-requests": "60",
      "x-ratelimit-remaining-requests": "61",
    });
    expect(windowOf(d, "requests")).toMatchObject({ limit: 60, remaining: 61 });
    expect(d.warnings).toEqual([
      { path: "headers.x-ratelimit-remaining-requests", message: "remaining 61 exceeds limit 60" },
    ]);
  });

  it("reads header names in any case", () => {
    const d = derive("OpenAI", {
      "X-RateLimit-Limit-Requests": "60",
      "X-RATELIMIT-RESET-REQUESTS": "1s",
    });
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: 60, remaining: null, resets_at: AT + 1000 },
    ]);
  });
});
