import { describe, expect, it } from "vitest";
import {
  isRateLimitHeader,
  keepRateLimitHeaders,
  MAX_HEADER_NAME_LENGTH,
  MAX_HEADER_VALUE_LENGTH,
  MAX_KEPT_HEADERS,
} from "../../src/providers/keep-headers.js";

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
  it("keeps only rate-limit headers, lowercased, and counts the rest as dropped", () => {
    const { kept, dropped, violation } = keepRateLimitHeaders(OPENAI_ANSWER);
    expect(kept).toEqual({
      "x-ratelimit-limit-requests": "60",
      "x-ratelimit-limit-tokens": "150000",
      "x-ratelimit-remaining-requests": "59",
      "x-ratelimit-remaining-tokens": "149984",
      "x-ratelimit-reset-requests": "1s",
      "x-ratelimit-reset-tokens": "6m0s",
    });
    expect(dropped).toBe(10);
    expect(violation).toBeNull();
    const text = JSON.stringify(kept);
    for (const secret of ["secret", "acme-corp", "req_", "sk-"]) expect(text).not.toContain(secret);
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

  it("keeps the first of two names that differ only in case", () => {
    const { kept, dropped } = keepRateLimitHeaders({ "Retry-After": "5", "retry-after": "9" });
    expect(kept).toEqual({ "retry-after": "5" });
    expect(dropped).toBe(1);
  });

  it(`keeps at most ${MAX_KEPT_HEADERS} headers and says the report broke the bound`, () => {
    const many = Object.fromEntries(
      Array.from({ length: MAX_KEPT_HEADERS + 3 }, (_, i) => [`x-ratelimit-limit-w${i}`, "1"]),
    );
    const { kept, dropped, violation } = keepRateLimitHeaders(many);
    expect(Object.keys(kept)).toHaveLength(MAX_KEPT_HEADERS);
    expect(dropped).toBe(3);
    expect(violation).toEqual({ reason: "too_many", name: null });
    const exactly = Object.fromEntries(Object.entries(many).slice(0, MAX_KEPT_HEADERS));
    expect(keepRateLimitHeaders(exactly).violation).toBeNull();
  });

  it("bounds names and values, keeping what is within them", () => {
    const okName = `x-ratelimit-${"a".repeat(MAX_HEADER_NAME_LENGTH - 12)}`;
    const longName = `${okName}a`;
    expect(okName).toHaveLength(MAX_HEADER_NAME_LENGTH);
    const okValue = "9".repeat(MAX_HEADER_VALUE_LENGTH);
    const r = keepRateLimitHeaders({ [okName]: "1", "retry-after": okValue });
    expect(r.kept).toEqual({ [okName]: "1", "retry-after": okValue });
    expect(r.violation).toBeNull();

    const long = keepRateLimitHeaders({ [longName]: "1", "retry-after": "2" });
    expect(long.kept).toEqual({ "retry-after": "2" });
    expect(long.violation?.reason).toBe("name_too_long");

    const bigValue = keepRateLimitHeaders({ "retry-after": `${okValue}9` });
    expect(bigValue.kept).toEqual({});
    expect(bigValue.violation).toEqual({ reason: "value_too_long", name: "retry-after" });

    // An oversized header that is not a rate-limit header is simply dropped.
    const other = keepRateLimitHeaders({ "x-huge": "a".repeat(10_000), ["b".repeat(500)]: "1" });
    expect(other).toEqual({ kept: {}, dropped: 2, violation: null });
  });

  it("keeps only string values", () => {
    const r = keepRateLimitHeaders({ "retry-after": 5, "x-ratelimit-limit-requests": "60" });
    expect(r.kept).toEqual({ "x-ratelimit-limit-requests": "60" });
    expect(r.violation).toEqual({ reason: "value_not_string", name: "retry-after" });
  });
});
