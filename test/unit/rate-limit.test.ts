import { describe, expect, it } from "vitest";
import { deriveWindows } from "../../src/providers/derive-windows.js";
import { isRateLimited, poolExhaustedBy, retryAtOf } from "../../src/report/rate-limit.js";
import {
  ANTHROPIC_RATE_LIMIT_ERROR,
  BEDROCK_THROTTLING,
  GEMINI_FREE_TIER_DAY_429,
  VERTEX_RESOURCE_EXHAUSTED,
} from "../fixtures/providers/documented.js";
import { AT, source } from "../fixtures/providers/source.js";

// A report whose error is a rate limit: which one says so, what retry delay it states, and
// whether it names its window (a parser read one at 0) or exhausts the pool as a whole.

const of = (provider: string, error: unknown, headers: Record<string, string> | null = null) => {
  const s = source(provider, headers, { error });
  return { s, windows: deriveWindows(s).windows };
};

describe("a rate limit", () => {
  it("is said by a 429, RESOURCE_EXHAUSTED, ThrottlingException or rate_limit_error", () => {
    for (const error of [
      GEMINI_FREE_TIER_DAY_429,
      VERTEX_RESOURCE_EXHAUSTED,
      BEDROCK_THROTTLING,
      ANTHROPIC_RATE_LIMIT_ERROR,
      { status: 429 },
    ])
      expect(isRateLimited({ error }), JSON.stringify(error).slice(0, 60)).toBe(true);
    for (const error of [null, undefined, { error: { code: 400, status: "INVALID_ARGUMENT" } }])
      expect(isRateLimited({ error })).toBe(false);
  });

  it("names Gemini's window: no pool-wide mark, the window at 0 until retryDelay", () => {
    const { s, windows } = of("gemini", GEMINI_FREE_TIER_DAY_429);
    expect(windows).toEqual([
      expect.objectContaining({
        dimension: "requests",
        window: "1d",
        remaining: 0,
        resets_at: AT + 22_000,
      }),
    ]);
    expect(poolExhaustedBy(s, windows)).toBeNull();
  });

  it("exhausts the pool when it names no window: Vertex's bare 429, Bedrock's throttle", () => {
    const vertex = of("vertex", VERTEX_RESOURCE_EXHAUSTED);
    expect(poolExhaustedBy(vertex.s, vertex.windows)).toEqual({ until: null });
    const bedrock = of("bedrock", BEDROCK_THROTTLING);
    expect(bedrock.windows).toEqual([]);
    expect(poolExhaustedBy(bedrock.s, bedrock.windows)).toEqual({ until: null });
  });

  it("lasts until the retry delay the answer states: retry-after-ms, retry-after, RetryInfo", () => {
    const cases: [Record<string, string> | null, unknown, number | null][] = [
      [{ "retry-after-ms": "1500" }, BEDROCK_THROTTLING, AT + 1_500],
      [{ "x-ms-retry-after-ms": "250" }, { status: 429 }, AT + 250],
      [{ "retry-after": "30" }, ANTHROPIC_RATE_LIMIT_ERROR, AT + 30_000],
      [{ "retry-after": "Thu, 01 Jan 2026 00:02:00 GMT" }, { status: 429 }, AT + 120_000],
      [
        null,
        {
          error: {
            ...VERTEX_RESOURCE_EXHAUSTED.error,
            details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "7s" }],
          },
        },
        AT + 7_000,
      ],
      // Junk and a delay past a year are no delay.
      [{ "retry-after": "soon" }, { status: 429 }, null],
      [{ "retry-after-ms": "99999999999" }, { status: 429 }, null],
    ];
    for (const [headers, error, until] of cases) {
      const { s, windows } = of("unknown-provider", error, headers);
      expect(retryAtOf(s), JSON.stringify(headers)).toBe(until);
      expect(poolExhaustedBy(s, windows)).toEqual({ until });
    }
  });

  it("names a window its headers put at 0: no pool-wide mark", () => {
    const { s, windows } = of(
      "azure-openai",
      { status: 429 },
      {
        "x-ratelimit-remaining-requests": "0",
        "retry-after-ms": "2000",
      },
    );
    expect(windows).toEqual([
      expect.objectContaining({ dimension: "requests", remaining: 0, resets_at: AT + 2_000 }),
    ]);
    expect(poolExhaustedBy(s, windows)).toBeNull();
  });
});
