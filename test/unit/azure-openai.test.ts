import { describe, expect, it } from "vitest";
import { AT, derive, windowOf } from "../fixtures/providers/source.js";

// Azure OpenAI: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits
// What Azure sends, as answers have shown it: often only the remaining figures
// (EvolvingPrograms/oaib#11), and -1 for figures it does not state (openai/openai-dotnet#838).

describe("azure-openai parser", () => {
  it("reads remaining-only answers as per-minute windows of unknown limit", () => {
    const d = derive("azure", {
      "x-ratelimit-remaining-requests": "79",
      "x-ratelimit-remaining-tokens": "61353",
      "x-ms-region": "North Central US",
    });
    expect(d.parser).toBe("azure-openai@1");
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: null, remaining: 79, resets_at: null },
      { dimension: "tokens", window: "1m", limit: null, remaining: 61_353, resets_at: null },
    ]);
    expect(d.warnings).toEqual([]);
  });

  it("reads -1 as unknown, with a warning for each, and its plain-seconds reset", () => {
    const d = derive("azure-openai", {
      "x-ratelimit-limit-tokens": "-1",
      "x-ratelimit-remaining-tokens": "-1",
      "x-ratelimit-reset-tokens": "0",
    });
    expect(windowOf(d, "tokens")).toEqual({
      dimension: "tokens",
      window: "1m",
      limit: null,
      remaining: null,
      resets_at: AT,
    });
    expect(d.warnings.map((w) => w.path)).toEqual([
      "headers.x-ratelimit-limit-tokens",
      "headers.x-ratelimit-remaining-tokens",
    ]);
    expect(d.warnings[0]?.message).toMatch(/negative figure -1/);
  });

  it("gives an exhausted window the reset of retry-after-ms", () => {
    const d = derive("azure", {
      "x-ratelimit-remaining-tokens": "0",
      "retry-after-ms": "1500",
      "retry-after": "2",
    });
    expect(windowOf(d, "tokens")).toMatchObject({ remaining: 0, resets_at: AT + 1500 });
  });

  it("takes no retry-after-ms past a year: null, with a warning for it", () => {
    for (const huge of ["9".repeat(300), "31536000001"]) {
      const d = derive("azure", {
        "x-ratelimit-remaining-tokens": "0",
        "retry-after-ms": huge,
      });
      expect(windowOf(d, "tokens")).toMatchObject({ remaining: 0, resets_at: null });
      expect(d.warnings).toEqual([
        { path: "headers.retry-after-ms", message: expect.stringMatching(/out of range/) },
      ]);
    }
    const year = derive("azure", {
      "x-ratelimit-remaining-tokens": "0",
      "x-ms-retry-after-ms": "31536000000",
    });
    expect(windowOf(year, "tokens")).toMatchObject({ resets_at: AT + 31_536_000_000 });
    expect(year.warnings).toEqual([]);
  });
});
