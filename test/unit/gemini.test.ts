import { describe, expect, it } from "vitest";
import { windowsOfRecord } from "../../src/providers/derive-windows.js";
import { storedWindowSource } from "../../src/providers/parsers/registry.js";
import {
  GEMINI_FREE_TIER_DAY_429,
  GEMINI_PAID_TIER_429,
} from "../fixtures/providers/documented.js";
import { AT, derive, NO_LIMITS } from "../fixtures/providers/source.js";

// Gemini sends no rate-limit headers; its 429 body says what ran out:
// https://ai.google.dev/gemini-api/docs/rate-limits. The bodies are answers as posted on
// https://discuss.ai.google.dev/t/incorrect-tiers-rate-limits-being-applied/97746 (paid tier) and
// a free-tier answer with three violations.
const PAID_TIER_429 = GEMINI_PAID_TIER_429;

const FREE_TIER_429 = {
  error: {
    code: 429,
    status: "RESOURCE_EXHAUSTED",
    details: [
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        violations: [
          { quotaId: "GenerateRequestsPerDayPerProjectPerModel-FreeTier" },
          { quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier" },
          { quotaId: "GenerateContentInputTokensPerModelPerMinute-FreeTier" },
        ],
      },
      { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "10s" },
    ],
  },
};

describe("gemini parser", () => {
  it("reads the 429 body as an exhausted input-tokens minute window resetting after retryDelay", () => {
    const d = derive("gemini", null, { error: PAID_TIER_429 });
    expect(d.parser).toBe("gemini@2");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      {
        dimension: "input_tokens",
        window: "1m",
        limit: 3_000_000,
        remaining: 0,
        resets_at: AT + 19_000,
        source: "learned",
      },
    ]);
  });

  it("gives each violation its window, the provider named google too", () => {
    const d = derive("google", null, { error: FREE_TIER_429 });
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1d", limit: null, remaining: 0, resets_at: AT + 10_000 },
      { dimension: "requests", window: "1m", limit: null, remaining: 0, resets_at: AT + 10_000 },
      {
        dimension: "input_tokens",
        window: "1m",
        limit: null,
        remaining: 0,
        resets_at: AT + 10_000,
      },
    ]);
  });

  it("reads a stored report's error text and the array form of the body", () => {
    const stored = windowsOfRecord({
      provider: "gemini",
      timestamp: new Date(AT).toISOString(),
      ...Object.fromEntries(Object.keys(NO_LIMITS).map((k) => [k, null])),
      requests_limit: null,
      requests_remaining: null,
      tokens_limit: null,
      tokens_remaining: null,
      reset_requests_ms: null,
      reset_tokens_ms: null,
      credits_limit: null,
      credits_remaining: null,
      headers: null,
      error: JSON.stringify([PAID_TIER_429]),
    });
    expect(stored.windows).toEqual([
      {
        dimension: "input_tokens",
        window: "1m",
        limit: 3_000_000,
        remaining: 0,
        resets_at: AT + 19_000,
        source: "learned",
      },
    ]);
  });

  it("warns about junk in the body and never refuses it", () => {
    const d = derive("gemini", null, {
      error: {
        error: {
          details: [
            { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "soon" },
            {
              "@type": "type.googleapis.com/google.rpc.QuotaFailure",
              violations: [
                { quotaId: 7 },
                { quotaId: "SomethingElse" },
                { quotaId: "GenerateRequestsPerMinute", quotaValue: "lots" },
              ],
            },
          ],
        },
      },
    });
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: null, remaining: 0, resets_at: null },
    ]);
    expect(d.warnings.map((w) => w.path)).toEqual([
      "error.error.details[0].retryDelay",
      "error.error.details[1].violations[0].quotaId",
      "error.error.details[1].violations[1].quotaId",
      "error.error.details[1].violations[2].quotaValue",
    ]);
    for (const body of [null, "text", 42, [], {}, { error: "x" }, { error: { details: "x" } }])
      expect(derive("gemini", null, { error: body }).windows).toEqual([]);
  });

  it("takes no retryDelay past a year: null, with a warning for it", () => {
    const body = (retryDelay: string) => ({
      error: {
        details: [
          {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            violations: [{ quotaId: "GenerateRequestsPerMinute" }],
          },
          { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay },
        ],
      },
    });
    for (const huge of [`${"9".repeat(300)}s`, "31536001s"]) {
      const d = derive("gemini", null, { error: body(huge) });
      expect(d.windows).toEqual([
        { dimension: "requests", window: "1m", limit: null, remaining: 0, resets_at: null },
      ]);
      expect(d.warnings).toEqual([
        {
          path: "error.error.details[1].retryDelay",
          message: expect.stringMatching(/out of range/),
        },
      ]);
    }
    const year = derive("gemini", null, { error: body("31536000s") });
    expect(year.windows[0]?.resets_at).toBe(AT + 31_536_000_000);
    expect(year.warnings).toEqual([]);
  });

  it("learns the per-day requests limit of the free tier's 429 (Google's documented shape)", () => {
    const d = derive("gemini", null, { error: GEMINI_FREE_TIER_DAY_429 });
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: "1d",
        limit: 250,
        remaining: 0,
        resets_at: AT + 22_000,
        source: "learned",
      },
    ]);
    // /reports reads a stored window's source by its parser: the same.
    expect(storedWindowSource(d.parser, { limit: 250 })).toBe("learned");
    expect(storedWindowSource("gemini@1", { limit: null })).toBe("stated");
    expect(storedWindowSource("groq@1", { limit: 250 })).toBe("stated");
  });

  it("reads the dimension from the quota metric when the id names none", () => {
    const d = derive("gemini", null, {
      error: {
        error: {
          details: [
            {
              "@type": "type.googleapis.com/google.rpc.QuotaFailure",
              violations: [
                {
                  quotaMetric:
                    "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
                  quotaId: "GenerateContentPerModelPerMinute-FreeTier",
                  quotaValue: "250000",
                },
              ],
            },
          ],
        },
      },
    });
    expect(d.windows).toEqual([
      {
        dimension: "input_tokens",
        window: "1m",
        limit: 250_000,
        remaining: 0,
        resets_at: null,
        source: "learned",
      },
    ]);
  });
});
