import { describe, expect, it } from "vitest";
import { derive } from "../fixtures/providers/source.js";

// Fireworks: https://docs.fireworks.ai/serverless/rate-limits — prompt and generated tokens per
// minute, in X-Ratelimit-Limit-Tokens-Prompt and X-Ratelimit-Limit-Tokens-Generated; the values
// are the documented starting limits (3.6 M prompt TPM, 36,000 generated TPM).

describe("fireworks parser", () => {
  it("reads prompt tokens as input tokens and generated tokens as output tokens, per minute", () => {
    const d = derive("fireworks", {
      "X-Ratelimit-Limit-Tokens-Prompt": "3600000",
      "X-Ratelimit-Remaining-Tokens-Prompt": "3598200",
      "X-Ratelimit-Limit-Tokens-Generated": "36000",
      "X-Ratelimit-Remaining-Tokens-Generated": "35900",
    });
    expect(d.parser).toBe("fireworks@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      {
        dimension: "input_tokens",
        window: "1m",
        limit: 3_600_000,
        remaining: 3_598_200,
        resets_at: null,
      },
      {
        dimension: "output_tokens",
        window: "1m",
        limit: 36_000,
        remaining: 35_900,
        resets_at: null,
      },
    ]);
  });
});
