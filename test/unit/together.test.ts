import { describe, expect, it } from "vitest";
import { AT, derive } from "../fixtures/providers/source.js";

// Together's header names: https://docs.together.ai/docs/rate-limits (Rate limits in headers);
// the docs give names, not values: these are in the ranges of their tier table.

describe("together parser", () => {
  it("reads requests from x-ratelimit-* and tokens from x-tokenlimit-*, windows unknown", () => {
    const d = derive("together", {
      "x-ratelimit-limit": "600",
      "x-ratelimit-remaining": "598",
      "x-ratelimit-reset": "1",
      "x-tokenlimit-limit": "180000",
      "x-tokenlimit-remaining": "179000",
    });
    expect(d.parser).toBe("together@1");
    expect(d.warnings).toEqual([]);
    expect(d.windows).toEqual([
      { dimension: "requests", window: null, limit: 600, remaining: 598, resets_at: AT + 1000 },
      { dimension: "tokens", window: null, limit: 180_000, remaining: 179_000, resets_at: null },
    ]);
  });
});
