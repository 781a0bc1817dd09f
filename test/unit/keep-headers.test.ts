import { describe, expect, it } from "vitest";
import { isRateLimitHeader } from "../../src/providers/keep-headers.js";

// An OpenAI answer's headers as a client forwards them (the shape of
// https://community.openai.com/t/x-ratelimit-headers-missing/935514), plus what must never pass.
const OPENAI_ANSWER = {
  date: "Tue, 10 Sep 2024 23:58:08 GMT",
  "content-type": "application/json",
  "openai-organization": "acme-corp",
  "openai-processing-ms": "1032",
  "openai-version": "2020-10-01",
  "x-request-id": "req_deaa3616cbd15d33b4db96b3ba74d2b4",
  "Set-Cookie": "__cf_bm=secret; path=/; HttpOnly",
  Cookie: "session=secret",
  Authorization: "Bearer sk-secret",
  "cf-ray": "8c135d3eeec4a97a-SYD",
  "X-RateLimit-Limit-Requests": "60",
  "x-ratelimit-limit-tokens": "150000",
  "x-ratelimit-remaining-requests": "59",
  "x-ratelimit-remaining-tokens": "149984",
  "x-ratelimit-reset-requests": "1s",
  "x-ratelimit-reset-tokens": "6m0s",
};

describe("the rate-limit header allowlist", () => {
  it("allows only the rate-limit headers of an answer", () => {
    expect(Object.keys(OPENAI_ANSWER).filter(isRateLimitHeader)).toEqual([
      "X-RateLimit-Limit-Requests",
      "x-ratelimit-limit-tokens",
      "x-ratelimit-remaining-requests",
      "x-ratelimit-remaining-tokens",
      "x-ratelimit-reset-requests",
      "x-ratelimit-reset-tokens",
    ]);
  });

  it("drops cookies, set-cookie, organisation and request ids, authorization in any casing", () => {
    for (const name of [
      "cookie",
      "SET-COOKIE",
      "set-cookie",
      "openai-organization",
      "anthropic-organization-id",
      "x-request-id",
      "request-id",
      "Authorization",
      "x-api-key",
      "x-ratelimit", // the bare prefix names nothing
      "ratelimit-foo",
      "retry-after-foo",
      "x-ratelimitx-limit",
    ])
      expect(isRateLimitHeader(name), name).toBe(false);
  });

  it("keeps each provider's names, case-insensitively", () => {
    for (const name of [
      "x-ratelimit-limit-requests", // OpenAI, Azure, Groq
      "x-ratelimit-remaining-tokens_usage_based", // OpenAI
      "Anthropic-RateLimit-Input-Tokens-Reset", // Anthropic
      "anthropic-ratelimit-unified-5h-utilization", // Anthropic subscriptions
      "anthropic-ratelimit-unified-7d-reset",
      "anthropic-priority-output-tokens-remaining",
      "x-ratelimit-limit-req-minute", // Mistral
      "x-ratelimit-remaining-tokens-month",
      "x-ratelimitbysize-limit-month",
      "ratelimitbysize-reset",
      "x-ratelimit-reset-requests-day", // Cerebras
      "x-tokenlimit-remaining", // Together
      "X-Ratelimit-Limit-Tokens-Prompt", // Fireworks
      "X-RateLimit-Reset", // OpenRouter, generic
      "RateLimit", // IETF
      "RateLimit-Policy",
      "RateLimit-Limit",
      "RateLimit-Remaining",
      "RateLimit-Reset",
      "Retry-After",
      "retry-after-ms", // Azure
    ])
      expect(isRateLimitHeader(name), name).toBe(true);
  });
});
