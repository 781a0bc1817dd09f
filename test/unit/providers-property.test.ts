import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deriveWindows } from "../../src/providers/derive-windows.js";
import { PARSERS } from "../../src/providers/parsers/registry.js";
import { type DerivedWindows, WINDOW_LENGTHS } from "../../src/providers/window.js";
import { AT, NO_LIMITS } from "../fixtures/providers/source.js";

// Every parser, over headers in any casing, with fields missing, junk values and sentinels: it
// never throws, every figure is a finite number or null, and every junk value in a header the
// parser reads is named by a warning.

/** Headers each parser reads one value from (a junk value there must be warned about). */
const READS: Record<string, string[]> = {
  openai: ["requests", "tokens", "tokens_usage_based"].flatMap((w) =>
    ["limit", "remaining", "reset"].map((f) => `x-ratelimit-${f}-${w}`),
  ),
  "azure-openai": [
    ...["requests", "tokens"].flatMap((w) =>
      ["limit", "remaining", "reset"].map((f) => `x-ratelimit-${f}-${w}`),
    ),
    "retry-after-ms",
    "x-ms-retry-after-ms",
  ],
  anthropic: [
    ...["requests", "tokens", "input-tokens", "output-tokens"].flatMap((w) =>
      ["limit", "remaining", "reset"].flatMap((f) => [`anthropic-ratelimit-${w}-${f}`]),
    ),
    ...["input-tokens", "output-tokens"].flatMap((w) =>
      ["limit", "remaining", "reset"].map((f) => `anthropic-priority-${w}-${f}`),
    ),
    ...["5h", "7d", "7d_oi"].flatMap((w) =>
      ["utilization", "reset"].map((f) => `anthropic-ratelimit-unified-${w}-${f}`),
    ),
  ],
  groq: ["requests", "tokens"].flatMap((w) =>
    ["limit", "remaining", "reset"].map((f) => `x-ratelimit-${f}-${w}`),
  ),
  mistral: [
    ...["req-minute", "tokens-minute", "tokens-month"].flatMap((w) =>
      ["limit", "remaining"].map((f) => `x-ratelimit-${f}-${w}`),
    ),
    ...["minute", "month"].flatMap((w) =>
      ["limit", "remaining"].map((f) => `x-ratelimitbysize-${f}-${w}`),
    ),
    "ratelimitbysize-limit",
    "ratelimitbysize-remaining",
    "ratelimitbysize-reset",
  ],
  cerebras: ["requests-day", "tokens-minute"].flatMap((w) =>
    ["limit", "remaining", "reset"].map((f) => `x-ratelimit-${f}-${w}`),
  ),
  together: [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-tokenlimit-limit",
    "x-tokenlimit-remaining",
    "x-tokenlimit-reset",
  ],
  fireworks: ["tokens-prompt", "tokens-generated", "requests"].flatMap((w) =>
    ["limit", "remaining", "reset"].map((f) => `x-ratelimit-${f}-${w}`),
  ),
  openrouter: [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-limit-requests",
  ],
  gemini: [],
  generic: [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-limit-requests-day",
    "x-ratelimit-reset-tokens-minute",
    "ratelimit-remaining",
    "ratelimit-reset",
  ],
};
/** Structured or shared headers: read, but junk there may go unnamed (it may just not parse). */
const ALSO_SENT = [
  "retry-after",
  "ratelimit",
  "ratelimit-policy",
  "ratelimit-limit",
  "x-ratelimit-limit-req-10s",
];

/** Values no parser can read as a figure or a reset. */
const JUNK = [
  "abc",
  "",
  "  ",
  "-1",
  "-7",
  "NaN",
  "Infinity",
  "1e400",
  "12abc",
  "--",
  "0x10",
  "9".repeat(400),
  "١٢",
];
const PLAUSIBLE = [
  "0",
  "1",
  "60",
  "149984",
  "0.26",
  "1.2",
  "6m0s",
  "2m59.56s",
  "20ms",
  "2025-08-21T12:40:59Z",
  "1782039600",
  "1741305600000",
  "33011.38",
  '"hour";r=4;t=5',
  "10;w=1, 50;w=60",
  "limit=10, remaining=9, reset=1",
];

const value = fc.oneof(
  fc.constantFrom(...JUNK),
  fc.constantFrom(...PLAUSIBLE),
  fc.string({ maxLength: 40 }),
);

function headersFor(names: string[]) {
  return fc
    .uniqueArray(fc.constantFrom(...names), { maxLength: names.length })
    .chain((chosen) =>
      fc
        .tuple(...chosen.map((n) => fc.tuple(fc.mixedCase(fc.constant(n)), value)))
        .map((pairs) => Object.fromEntries(pairs)),
    );
}

function expectSound(d: DerivedWindows) {
  for (const w of d.windows) {
    for (const n of [w.limit, w.remaining])
      if (n !== null) expect(Number.isFinite(n) && n >= 0).toBe(true);
    if (w.resets_at !== null) expect(Number.isFinite(w.resets_at)).toBe(true);
    expect(w.window === null || (WINDOW_LENGTHS as readonly string[]).includes(w.window)).toBe(
      true,
    );
    expect(w.dimension).toMatch(/^[a-z0-9_]+$/);
  }
  for (const warning of d.warnings) {
    expect(typeof warning.path).toBe("string");
    expect(typeof warning.message).toBe("string");
  }
}

describe("every parser, over junk", () => {
  for (const parser of PARSERS) {
    it(`${parser.name}: never throws, keeps figures finite or null, warns about junk`, () => {
      const reads = READS[parser.name] ?? [];
      const names = [...new Set([...reads, ...ALSO_SENT])];
      fc.assert(
        fc.property(headersFor(names), (headers) => {
          const source = {
            provider: parser.name,
            at: AT,
            limits: NO_LIMITS,
            credits: null,
            headers,
            error: null,
          };
          const d = deriveWindows(source);
          expectSound(d);
          expect(d.parser).toBe(
            Object.keys(headers).length === 0 ? "limits@1" : `${parser.name}@${parser.version}`,
          );
          // The parser itself never throws either (deriveWindows would have caught it), and
          // called on its own it reads the same headers in any case.
          expect(d.warnings.some((w) => w.path === "parser")).toBe(false);
          const direct = parser.parse(source);
          expectSound({ ...direct, parser: "" });
          if (Object.keys(headers).length > 0) expect(direct.windows).toEqual(d.windows);
          const warned = new Set(d.warnings.map((w) => w.path));
          for (const [name, v] of Object.entries(headers))
            if (reads.includes(name.toLowerCase()) && JUNK.includes(v))
              expect(
                warned.has(`headers.${name.toLowerCase()}`),
                `${name}: ${JSON.stringify(v)}`,
              ).toBe(true);
        }),
        { numRuns: 300 },
      );
    });
  }

  it("gemini: any error body, and bodies with junk in every field, never throw", () => {
    const junkValue = fc.oneof(
      fc.constantFrom(...JUNK),
      fc.constantFrom(...PLAUSIBLE),
      fc.anything(),
    );
    const body = fc.oneof(
      fc.anything(),
      fc.record({
        error: fc.record({
          details: fc.array(
            fc.oneof(
              fc.record({
                "@type": fc.constant("type.googleapis.com/google.rpc.RetryInfo"),
                retryDelay: junkValue,
              }),
              fc.record({
                "@type": fc.constant("type.googleapis.com/google.rpc.QuotaFailure"),
                violations: fc.oneof(
                  junkValue,
                  fc.array(
                    fc.record(
                      {
                        quotaId: fc.oneof(
                          fc.constantFrom(
                            "GenerateContentPaidTierInputTokensPerModelPerMinute",
                            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                          ),
                          junkValue,
                        ),
                        quotaValue: junkValue,
                      },
                      { requiredKeys: [] },
                    ),
                  ),
                ),
              }),
              fc.anything(),
            ),
          ),
        }),
      }),
    );
    fc.assert(
      fc.property(body, fc.constantFrom("gemini", "google"), (error, provider) => {
        const d = deriveWindows({
          provider,
          at: AT,
          limits: NO_LIMITS,
          credits: null,
          headers: null,
          error,
        });
        expectSound(d);
        for (const w of d.windows) expect(w.remaining).toBe(0);
      }),
      { numRuns: 500 },
    );
  });
});
