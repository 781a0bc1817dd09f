import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sampleBody } from "../../fixtures/sample-reports.js";
import { deriveWindows, windowsOfRecord } from "../../src/providers/derive-windows.js";
import { PARSERS, parserFor } from "../../src/providers/parsers/registry.js";
import type { Window, WindowSource } from "../../src/providers/window.js";
import { reportBodySchema, toRecord } from "../../src/report/report-schema.js";
import { AT, derive, NO_LIMITS } from "../fixtures/providers/source.js";

/** The mapping reports were read with before issue 34, written out again as the oracle. */
function legacyOracle(s: WindowSource): Window[] {
  const out: Window[] = [];
  const reset = (ms: number | null) => (ms === null ? null : s.at + ms);
  const l = s.limits;
  if (l.requests_limit !== null || l.requests_remaining !== null)
    out.push({
      dimension: "requests",
      window: null,
      limit: l.requests_limit,
      remaining: l.requests_remaining,
      resets_at: reset(l.reset_requests_ms),
    });
  if (l.tokens_limit !== null || l.tokens_remaining !== null)
    out.push({
      dimension: "tokens",
      window: null,
      limit: l.tokens_limit,
      remaining: l.tokens_remaining,
      resets_at: reset(l.reset_tokens_ms),
    });
  if (s.credits && (s.credits.credits_limit !== null || s.credits.credits_remaining !== null))
    out.push({
      dimension: "credits",
      window: null,
      limit: s.credits.credits_limit,
      remaining: s.credits.credits_remaining,
      resets_at: null,
    });
  return out;
}

const figure = fc.option(fc.nat({ max: 10_000_000 }), { nil: null });

describe("deriveWindows", () => {
  it("reads a report with neither headers nor error exactly as before, for any figures", () => {
    fc.assert(
      fc.property(
        fc.record({
          provider: fc.constantFrom("openai", "anthropic", "groq", "gemini", "openrouter", "x"),
          // A report's timestamp lies from 2000 on (report-schema.ts), and so do the resets.
          at: fc.integer({ min: Date.UTC(2000, 0, 1), max: 4_102_444_800_000 }),
          limits: fc.record({
            requests_limit: figure,
            requests_remaining: figure,
            tokens_limit: figure,
            tokens_remaining: figure,
            reset_requests_ms: figure,
            reset_tokens_ms: figure,
          }),
          credits: fc.option(fc.record({ credits_limit: figure, credits_remaining: figure }), {
            nil: null,
          }),
          headers: fc.constantFrom(null, {}),
          error: fc.constantFrom(null, undefined),
        }),
        (s) => {
          expect(deriveWindows(s)).toEqual({
            windows: legacyOracle(s),
            warnings: [],
            parser: "limits@1",
          });
        },
      ),
    );
  });

  it("reads a stored reset past a year (a row stored before the bound) as unknown, with a warning", () => {
    const d = deriveWindows({
      provider: "openai",
      at: AT,
      limits: { ...NO_LIMITS, requests_limit: 10, requests_remaining: 1, reset_requests_ms: 9e15 },
      credits: null,
      headers: null,
      error: null,
    });
    expect(d.windows).toEqual([
      { dimension: "requests", window: null, limit: 10, remaining: 1, resets_at: null },
    ]);
    expect(d.warnings).toEqual([
      { path: "limits.reset_requests_ms", message: expect.stringMatching(/out of range/) },
    ]);
  });

  it("keeps every figure of the real client library's reports, through the stored record", () => {
    for (let i = 0; i < 300; i++) {
      const body = reportBodySchema.parse(sampleBody(i));
      const record = toRecord(body, {
        reportId: `r${i}`,
        projectId: "p",
        keyId: "k",
        receivedAt: AT,
      });
      const derived = windowsOfRecord(record);
      const at = Date.parse(record.timestamp);
      expect(derived.parser).toBe("limits@1");
      expect(derived.warnings).toEqual([]);
      expect(derived.windows).toEqual(
        legacyOracle({
          provider: record.provider,
          at,
          limits: body.limits,
          credits:
            record.credits_limit === null && record.credits_remaining === null
              ? null
              : {
                  credits_limit: record.credits_limit,
                  credits_remaining: record.credits_remaining,
                },
          headers: null,
          error: null,
        }),
      );
    }
  });

  it("reads a stored record's headers text, and falls back to the figures when it is not JSON", () => {
    const record = {
      provider: "groq",
      timestamp: new Date(AT).toISOString(),
      requests_limit: 5,
      requests_remaining: 4,
      tokens_limit: 100,
      tokens_remaining: 90,
      reset_requests_ms: null,
      reset_tokens_ms: null,
      credits_limit: null,
      credits_remaining: null,
    };
    const withHeaders = windowsOfRecord({
      ...record,
      headers: JSON.stringify({
        "x-ratelimit-limit-requests": "14400",
        "x-ratelimit-remaining-requests": "14370",
      }),
    });
    expect(withHeaders.parser).toBe("groq@1");
    expect(withHeaders.windows).toEqual([
      { dimension: "requests", window: "1d", limit: 14_400, remaining: 14_370, resets_at: null },
      { dimension: "tokens", window: null, limit: 100, remaining: 90, resets_at: null },
    ]);
    expect(windowsOfRecord({ ...record, headers: "{not json" }).parser).toBe("limits@1");
  });

  it("skips non-string header values with a warning", () => {
    const d = deriveWindows({
      provider: "openai",
      at: AT,
      limits: NO_LIMITS,
      credits: null,
      headers: {
        "x-ratelimit-limit-requests": 60 as unknown as string,
        "x-ratelimit-remaining-requests": "59",
      },
      error: null,
    });
    expect(d.windows).toEqual([
      { dimension: "requests", window: "1m", limit: null, remaining: 59, resets_at: null },
    ]);
    expect(d.warnings).toEqual([
      { path: "headers.x-ratelimit-limit-requests", message: "header value is not a string" },
    ]);
  });

  it("picks the parser by provider and alias, the generic one for the rest", () => {
    const names: Record<string, string> = {
      openai: "openai",
      azure: "azure-openai",
      "Azure-OpenAI": "azure-openai",
      anthropic: "anthropic",
      groq: "groq",
      mistral: "mistral",
      mistralai: "mistral",
      cerebras: "cerebras",
      together: "together",
      togetherai: "together",
      fireworks: "fireworks",
      "fireworks-ai": "fireworks",
      openrouter: "openrouter",
      gemini: "gemini",
      google: "gemini",
      " Google ": "gemini",
      deepseek: "generic",
      "": "generic",
    };
    for (const [provider, name] of Object.entries(names))
      expect(parserFor(provider).name, provider).toBe(name);
    expect(new Set(PARSERS.map((p) => p.name)).size).toBe(PARSERS.length);
    expect(derive("deepseek", { "x-ratelimit-limit-requests": "1" }).parser).toBe("generic@1");
  });
});

describe("at most 16 windows a report", () => {
  const invented = (n: number) =>
    Object.fromEntries(
      Array.from({ length: n }, (_, i) => [
        [`x-ratelimit-limit-made_up_${i}`, "100"],
        [`x-ratelimit-remaining-made_up_${i}`, "10"],
      ]).flat(),
    );

  it("keeps the contract's dimensions first, then the parser's order, and warns once", () => {
    const d = deriveWindows({
      provider: "openai",
      at: AT,
      limits: { ...NO_LIMITS, requests_limit: 60, requests_remaining: 30 },
      credits: null,
      headers: {
        ...invented(30),
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "5",
      },
      error: null,
    });
    expect(d.windows).toHaveLength(16);
    expect(d.windows.map((w) => w.dimension)).toEqual(
      expect.arrayContaining(["requests", "tokens", "made_up_0", "made_up_13"]),
    );
    expect(d.windows.map((w) => w.dimension)).not.toContain("made_up_14");
    expect(d.warnings.filter((w) => w.path === "windows")).toEqual([
      {
        path: "windows",
        message:
          "16 windows past the 16 a report may carry: dropped (made_up_14, made_up_15, made_up_16, …)",
      },
    ]);
  });

  it("16 windows are kept whole, without a warning", () => {
    const d = deriveWindows({
      provider: "openai",
      at: AT,
      limits: NO_LIMITS,
      credits: null,
      headers: invented(16),
      error: null,
    });
    expect(d.windows).toHaveLength(16);
    expect(d.warnings).toEqual([]);
  });
});
