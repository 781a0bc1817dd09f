import { describe, expect, it } from "vitest";
import { derive } from "../fixtures/providers/source.js";

// OpenRouter: https://openrouter.ai/docs/api-reference/limits — a 429's X-RateLimit-* headers,
// the reset in epoch milliseconds.

describe("openrouter parser", () => {
  it("reads the requests window with its epoch-ms reset", () => {
    const d = derive("openrouter", {
      "X-RateLimit-Limit": "20",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": "1741305600000",
    });
    expect(d.parser).toBe("openrouter@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      {
        dimension: "requests",
        window: null,
        limit: 20,
        remaining: 0,
        resets_at: 1_741_305_600_000,
      },
    ]);
  });

  it("keeps the client's credits, which no header states", () => {
    const d = derive(
      "openrouter",
      { "x-ratelimit-limit": "20", "x-ratelimit-remaining": "19" },
      { credits: { credits_limit: 100, credits_remaining: 99.5 } },
    );
    expect(d.windows.map((w) => w.dimension)).toEqual(["requests", "credits"]);
  });
});
