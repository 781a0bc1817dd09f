import { describe, expect, it } from "vitest";
import { NULL_LIMITS } from "../../fixtures/sample-reports.js";
import {
  parseIsoTimestamp,
  type ReportBody,
  reportBodySchema,
} from "../../src/report/report-schema.js";

// The wire rules of docs/report-api.md for a report body, and the timestamp parser.

const HOUR_MS = 60 * 60 * 1000;

const nullLimits = NULL_LIMITS;

const body = (extra: Record<string, unknown> = {}) => ({
  provider: "openai",
  limits: nullLimits,
  ...extra,
});

const parse = (value: unknown): ReportBody => reportBodySchema.parse(value);

/** Paths of the issues of a refused body; [] when it is accepted. */
function issuePaths(value: unknown): string[] {
  const r = reportBodySchema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => i.path.join("."));
}

const iso = (ms: number) => new Date(ms).toISOString();

describe("reportBodySchema: provider, app, model", () => {
  it("trims and lowercases the provider; 1 to 64 characters", () => {
    expect(parse(body({ provider: "  OpenAI \t" })).provider).toBe("openai");
    expect(parse(body({ provider: "x".repeat(64) })).provider).toHaveLength(64);
    expect(issuePaths(body({ provider: "x".repeat(65) }))).toEqual(["provider"]);
    expect(issuePaths(body({ provider: "   " }))).toEqual(["provider"]);
    expect(issuePaths(body({ provider: "" }))).toEqual(["provider"]);
  });

  it("requires the provider to be a string", () => {
    expect(issuePaths({ limits: nullLimits })).toEqual(["provider"]);
    expect(issuePaths(body({ provider: null }))).toEqual(["provider"]);
    expect(issuePaths(body({ provider: 7 }))).toEqual(["provider"]);
  });

  it('defaults the app to "default" when absent, null, empty or blank; trims it', () => {
    expect(parse(body()).app).toBe("default");
    expect(parse(body({ app: null })).app).toBe("default");
    expect(parse(body({ app: "" })).app).toBe("default");
    expect(parse(body({ app: "   " })).app).toBe("default");
    expect(parse(body({ app: "  billing " })).app).toBe("billing");
    expect(parse(body({ app: "a".repeat(128) })).app).toHaveLength(128);
    expect(issuePaths(body({ app: "a".repeat(129) }))).toEqual(["app"]);
    expect(issuePaths(body({ app: 1 }))).toEqual(["app"]);
  });

  it("keeps the model as sent, null when absent or null, 1 to 256 characters", () => {
    expect(parse(body()).model).toBeNull();
    expect(parse(body({ model: null })).model).toBeNull();
    expect(parse(body({ model: " GPT-4o / ünïcode " })).model).toBe(" GPT-4o / ünïcode ");
    expect(parse(body({ model: "m".repeat(256) })).model).toHaveLength(256);
    expect(issuePaths(body({ model: "m".repeat(257) }))).toEqual(["model"]);
    expect(issuePaths(body({ model: "" }))).toEqual(["model"]);
    expect(issuePaths(body({ model: 4 }))).toEqual(["model"]);
  });

  it("refuses strings with lone surrogates (not valid UTF-8)", () => {
    expect(issuePaths(body({ provider: "open\uD800ai" }))).toEqual(["provider"]);
    expect(issuePaths(body({ model: "gpt\uDFFF" }))).toEqual(["model"]);
  });

  it("refuses a body that is not an object", () => {
    for (const value of [null, [], "report", 3]) expect(issuePaths(value)).toEqual([""]);
  });

  it("ignores unknown keys, top-level and nested", () => {
    const parsed = parse({
      ...body({ credits: { request_cost: 1, currency: "USD" } }),
      limits: { ...nullLimits, extra_limit: 5 },
      sdk_version: "9.9",
    });
    expect(parsed).not.toHaveProperty("sdk_version");
    expect(parsed.limits).not.toHaveProperty("extra_limit");
    expect(parsed.credits).not.toHaveProperty("currency");
  });
});

describe("reportBodySchema: limits and credits", () => {
  it("requires a limits object", () => {
    expect(issuePaths({ provider: "openai" })).toEqual(["limits"]);
    expect(issuePaths(body({ limits: null }))).toEqual(["limits"]);
    expect(issuePaths(body({ limits: [1, 2] }))).toEqual(["limits"]);
  });

  it("takes missing limit fields as null and rounds fractions to the nearest integer", () => {
    const parsed = parse(body({ limits: { requests_limit: 99.5, tokens_remaining: 10.49 } }));
    expect(parsed.limits).toEqual({ ...nullLimits, requests_limit: 100, tokens_remaining: 10 });
    expect(parse(body({ limits: { reset_tokens_ms: -2.4 } })).limits.reset_tokens_ms).toBe(-2);
  });

  it("refuses limits that are not finite numbers", () => {
    for (const bad of ["100", true, {}, [1], Number.POSITIVE_INFINITY, Number.NaN]) {
      expect(issuePaths(body({ limits: { ...nullLimits, tokens_limit: bad } }))).toEqual([
        "limits.tokens_limit",
      ]);
    }
  });

  it("refuses limits outside a signed 64-bit integer", () => {
    const largestBelow = 2 ** 63 - 1024; // the largest double below 2^63
    expect(parse(body({ limits: { requests_limit: largestBelow } })).limits.requests_limit).toBe(
      largestBelow,
    );
    expect(parse(body({ limits: { requests_limit: -largestBelow } })).limits.requests_limit).toBe(
      -largestBelow,
    );
    expect(issuePaths(body({ limits: { requests_limit: 2 ** 63 } }))).toEqual([
      "limits.requests_limit",
    ]);
    expect(issuePaths(body({ limits: { reset_requests_ms: -(2 ** 63) } }))).toEqual([
      "limits.reset_requests_ms",
    ]);
  });

  it("takes credits as an object, null or absent; missing credit fields are null", () => {
    expect(parse(body()).credits).toBeUndefined();
    expect(parse(body({ credits: null })).credits).toBeNull();
    expect(parse(body({ credits: { request_cost: 0.0021 } })).credits).toEqual({
      credits_limit: null,
      credits_remaining: null,
      request_cost: 0.0021,
    });
  });

  it("refuses credits of the wrong type or beyond 1e21", () => {
    expect(issuePaths(body({ credits: "5" }))).toEqual(["credits"]);
    expect(issuePaths(body({ credits: [] }))).toEqual(["credits"]);
    expect(issuePaths(body({ credits: { credits_limit: "5" } }))).toEqual([
      "credits.credits_limit",
    ]);
    expect(issuePaths(body({ credits: { request_cost: -1e21 } }))).toEqual([
      "credits.request_cost",
    ]);
    // A cost is never negative (a balance may be): the cost counters only grow.
    expect(issuePaths(body({ credits: { request_cost: -0.5 } }))).toEqual(["credits.request_cost"]);
    expect(issuePaths(body({ credits: { credits_remaining: -0.5, request_cost: 0 } }))).toEqual([]);
  });

  it("lists every issue, not only the first", () => {
    expect(issuePaths({ provider: "", limits: { tokens_limit: "1" }, model: 1 }).sort()).toEqual([
      "limits.tokens_limit",
      "model",
      "provider",
    ]);
  });
});

describe("reportBodySchema: timestamp", () => {
  it("normalises Z, offsets and any fractional precision to UTC milliseconds", () => {
    const ms = Date.UTC(2024, 4, 1, 10, 0, 0, 123);
    expect(parse(body({ timestamp: "2024-05-01T10:00:00.123Z" })).timestamp).toBe(ms);
    expect(parse(body({ timestamp: "2024-05-01T10:00:00.123456789Z" })).timestamp).toBe(ms);
    expect(parse(body({ timestamp: "2024-05-01T15:30:00.123+05:30" })).timestamp).toBe(ms);
    expect(parse(body({ timestamp: "2024-05-01T02:00:00.1239-0800" })).timestamp).toBe(ms);
  });

  it("is undefined when absent and null when null (the server's time is used later)", () => {
    expect(parse(body()).timestamp).toBeUndefined();
    expect(parse(body({ timestamp: null })).timestamp).toBeNull();
  });

  it("accepts 2000-01-01 up to 24 h after the server's clock, nothing outside", () => {
    const start = Date.UTC(2000, 0, 1);
    expect(parse(body({ timestamp: iso(start) })).timestamp).toBe(start);
    expect(issuePaths(body({ timestamp: iso(start - 1) }))).toEqual(["timestamp"]);
    const soon = Date.now() + 23 * HOUR_MS;
    expect(parse(body({ timestamp: iso(soon) })).timestamp).toBe(soon);
    expect(issuePaths(body({ timestamp: iso(Date.now() + 25 * HOUR_MS) }))).toEqual(["timestamp"]);
  });

  it("refuses non-ISO text, numbers and times without a zone", () => {
    for (const bad of [Date.now(), "yesterday", "2024-05-01", "2024-05-01T10:00:00"]) {
      expect(issuePaths(body({ timestamp: bad }))).toEqual(["timestamp"]);
    }
  });
});

describe("parseIsoTimestamp", () => {
  it("accepts leap days only in leap years", () => {
    expect(parseIsoTimestamp("2024-02-29T12:00:00Z")).toBe(Date.UTC(2024, 1, 29, 12));
    expect(parseIsoTimestamp("2000-02-29T00:00:00Z")).toBe(Date.UTC(2000, 1, 29));
    expect(parseIsoTimestamp("2023-02-29T12:00:00Z")).toBeNull();
    expect(parseIsoTimestamp("2100-02-29T12:00:00Z")).toBeNull();
  });

  it("refuses dates and times that do not exist", () => {
    for (const bad of [
      "2024-02-30T00:00:00Z",
      "2024-04-31T00:00:00Z",
      "2024-13-01T00:00:00Z",
      "2024-00-10T00:00:00Z",
      "2024-05-01T24:00:00Z",
      "2024-05-01T10:60:00Z",
      "2024-05-01T10:00:60Z",
    ]) {
      expect(parseIsoTimestamp(bad), bad).toBeNull();
    }
  });

  it("applies offsets with or without a colon, up to ±18:00", () => {
    const utc = Date.UTC(2024, 0, 1, 0, 0);
    expect(parseIsoTimestamp("2024-01-01T05:30:00+05:30")).toBe(utc);
    expect(parseIsoTimestamp("2023-12-31T16:00:00-0800")).toBe(utc);
    expect(parseIsoTimestamp("2024-01-01T14:00:00+14:00")).toBe(utc);
    expect(parseIsoTimestamp("2024-01-01T03:00:00+03")).toBe(utc);
    expect(parseIsoTimestamp("2024-01-01T00:00:00z")).toBe(utc);
    expect(parseIsoTimestamp("2024-01-01T00:00:00,5Z")).toBe(utc + 500);
  });

  it("refuses offsets out of range", () => {
    expect(parseIsoTimestamp("2024-01-01T00:00:00+18:30")).toBeNull();
    expect(parseIsoTimestamp("2024-01-01T00:00:00-19:00")).toBeNull();
    expect(parseIsoTimestamp("2024-01-01T00:00:00+05:60")).toBeNull();
  });
});
