import { describe, expect, it } from "vitest";
import { AT, derive, windowOf } from "../fixtures/providers/source.js";

// Anthropic's headers: https://docs.anthropic.com/en/api/rate-limits#response-headers
// The values are those of a recorded API answer (tidyllm's test fixture
// claude/api.anthropic.com/v1/messages-e050b5-POST.R), names and formats as documented.
const API_ANSWER = {
  "anthropic-ratelimit-input-tokens-limit": "80000",
  "anthropic-ratelimit-input-tokens-remaining": "80000",
  "anthropic-ratelimit-input-tokens-reset": "2025-08-21T12:40:59Z",
  "anthropic-ratelimit-output-tokens-limit": "16000",
  "anthropic-ratelimit-output-tokens-remaining": "15000",
  "anthropic-ratelimit-output-tokens-reset": "2025-08-21T12:41:00Z",
  "anthropic-ratelimit-requests-limit": "1000",
  "anthropic-ratelimit-requests-remaining": "999",
  "anthropic-ratelimit-requests-reset": "2025-08-21T12:40:59Z",
  "anthropic-ratelimit-tokens-limit": "96000",
  "anthropic-ratelimit-tokens-remaining": "95000",
  "anthropic-ratelimit-tokens-reset": "2025-08-21T12:40:59Z",
};
const T59 = Date.UTC(2025, 7, 21, 12, 40, 59);
const T60 = Date.UTC(2025, 7, 21, 12, 41, 0);

describe("anthropic parser", () => {
  it("gives input and output tokens their own windows, limits and RFC 3339 resets", () => {
    const d = derive("anthropic", API_ANSWER);
    expect(d.parser).toBe("anthropic@1");
    expect(d.warnings).toEqual([]);
    expect(windowOf(d, "input_tokens")).toEqual({
      dimension: "input_tokens",
      window: "1m",
      limit: 80_000,
      remaining: 80_000,
      resets_at: T59,
    });
    expect(windowOf(d, "output_tokens")).toEqual({
      dimension: "output_tokens",
      window: "1m",
      limit: 16_000,
      remaining: 15_000,
      resets_at: T60,
    });
    expect(windowOf(d, "requests")).toMatchObject({ limit: 1000, remaining: 999, resets_at: T59 });
    expect(windowOf(d, "tokens")).toMatchObject({ limit: 96_000, remaining: 95_000 });
    expect(d.windows).toHaveLength(4);
  });

  it("reads a subscription's 5-hour and 7-day utilisation as percent windows", () => {
    // Claude plans' unified headers, as answers carry them (not in the API docs).
    const d = derive("anthropic", {
      "anthropic-ratelimit-unified-status": "allowed",
      "anthropic-ratelimit-unified-5h-utilization": "0.26",
      "anthropic-ratelimit-unified-5h-reset": "1789414200",
      "anthropic-ratelimit-unified-7d-utilization": "0.06",
      "anthropic-ratelimit-unified-7d-reset": "1789542000",
      "anthropic-ratelimit-unified-7d_oi-utilization": "0.13",
      "anthropic-ratelimit-unified-representative-claim": "five_hour",
    });
    expect(d.windows).toEqual([
      {
        dimension: "unified",
        window: "5h",
        limit: 100,
        remaining: 74,
        resets_at: 1_789_414_200_000,
      },
      {
        dimension: "unified",
        window: "7d",
        limit: 100,
        remaining: 94,
        resets_at: 1_789_542_000_000,
      },
      { dimension: "unified_oi", window: "7d", limit: 100, remaining: 87, resets_at: null },
    ]);
    expect(d.warnings).toEqual([]);
  });

  it("gives an exhausted window without a reset the retry-after of a 429", () => {
    const d = derive("claude", {
      "anthropic-ratelimit-output-tokens-limit": "16000",
      "anthropic-ratelimit-output-tokens-remaining": "0",
      "retry-after": "5",
    });
    expect(windowOf(d, "output_tokens")).toMatchObject({ remaining: 0, resets_at: AT + 5000 });
  });

  it("reads utilisation above 1 as fully used, with a warning", () => {
    const d = derive("anthropic", { "anthropic-ratelimit-unified-5h-utilization": "1.2" });
    expect(windowOf(d, "unified", "5h")).toMatchObject({ limit: 100, remaining: 0 });
    expect(d.warnings.map((w) => w.path)).toEqual([
      "headers.anthropic-ratelimit-unified-5h-utilization",
    ]);
  });
});
