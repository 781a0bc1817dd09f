import { describe, expect, it } from "vitest";
import { summariseError } from "../../src/report/error-summary.js";
import {
  ANTHROPIC_RATE_LIMIT_ERROR,
  GEMINI_PAID_TIER_429,
} from "../fixtures/providers/documented.js";

// A provider's error body in a line for the report log: its status, whether a limit was hit, and
// the provider's own name for the error, read from the documented shapes and bounded.

describe("summariseError", () => {
  it("reads the providers' documented 429 bodies", () => {
    expect(summariseError(GEMINI_PAID_TIER_429)).toEqual({
      summary: "429 rate limited (RESOURCE_EXHAUSTED)",
      status: 429,
      rate_limited: true,
      kind: "RESOURCE_EXHAUSTED",
    });
    expect(summariseError(ANTHROPIC_RATE_LIMIT_ERROR)).toMatchObject({
      summary: "rate limited (rate_limit_error)",
      status: null,
      rate_limited: true,
    });
    // OpenAI (https://platform.openai.com/docs/guides/error-codes) and Azure OpenAI's "429".
    expect(
      summariseError({
        error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" },
      })?.summary,
    ).toBe("rate limited (rate_limit_exceeded)");
    expect(summariseError({ error: { code: "429", message: "Requests exceeded" } })?.summary).toBe(
      "429 rate limited",
    );
    // Bedrock, as the AWS SDK's exception serialises.
    expect(
      summariseError({ name: "ThrottlingException", $metadata: { httpStatusCode: 429 } })?.summary,
    ).toBe("429 rate limited (ThrottlingException)");
  });

  it("says error for a body that is no limit, and repeats only short plain tokens", () => {
    expect(summariseError({ error: { code: 500, status: "INTERNAL" } })?.summary).toBe(
      "500 error (INTERNAL)",
    );
    expect(summariseError({ error: { type: `x${"y".repeat(64)}` } })?.summary).toBe("error");
    expect(summariseError({ error: { type: "<script>" } })?.kind).toBeNull();
    expect(summariseError({ status: 1e9 })?.status).toBeNull();
    expect(summariseError("upstream timed out")?.summary).toBe("error");
    expect(summariseError([429])?.summary).toBe("error");
    expect(summariseError(null)).toBeNull();
  });
});
