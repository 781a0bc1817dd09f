import { describe, expect, it } from "vitest";
import { GROQ_DOCS_EXAMPLE } from "../fixtures/providers/documented.js";
import { AT, derive } from "../fixtures/providers/source.js";

// Groq's documented example (test/fixtures/providers/documented.ts): requests per day, tokens per
// minute.
const DOCS_EXAMPLE = GROQ_DOCS_EXAMPLE;

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
