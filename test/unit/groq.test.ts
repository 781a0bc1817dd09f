import { describe, expect, it } from "vitest";
import { AT, derive } from "../fixtures/providers/source.js";

// Groq's documented example: https://console.groq.com/docs/rate-limits (Rate Limit Headers):
// x-ratelimit-*-requests are requests per day (RPD), x-ratelimit-*-tokens tokens per minute (TPM).
const DOCS_EXAMPLE = {
  "retry-after": "2",
  "x-ratelimit-limit-requests": "14400",
  "x-ratelimit-limit-tokens": "18000",
  "x-ratelimit-remaining-requests": "14370",
  "x-ratelimit-remaining-tokens": "17997",
  "x-ratelimit-reset-requests": "2m59.56s",
  "x-ratelimit-reset-tokens": "7.66s",
};

describe("groq parser", () => {
  it("reads requests as a per-day window and tokens as a per-minute window", () => {
    const d = derive("groq", DOCS_EXAMPLE);
    expect(d.parser).toBe("groq@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: "1d",
        limit: 14_400,
        remaining: 14_370,
        resets_at: AT + 179_560,
      },
      { dimension: "tokens", window: "1m", limit: 18_000, remaining: 17_997, resets_at: AT + 7660 },
    ]);
  });
});
