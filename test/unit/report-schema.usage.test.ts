import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { validateReport, validateReportBySchema } from "../../src/edge/parse-report.js";
import { HttpError } from "../../src/http/errors.js";
import { fromRow, MAX_USAGE_TOKENS, toRow } from "../../src/report/report-schema.js";

// The optional `usage` of a report (issue 45): what a call used, stored beside the contract's
// figures for the windows counted against a limit. A body without it is the record it was; an
// unusable count is stored as null with a warning, never a refused report; a count of the wrong
// type is a 400, as every wrong type is; the edge's fast path gives what the schema gives.

const server = {
  reportId: "01900000-0000-7000-8000-000000000001",
  projectId: "prj_1",
  keyId: "key_1",
  receivedAt: 0,
};
const options = { retentionDays: 365 };
const base = { provider: "deepseek", model: "deepseek-chat", limits: {} };

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(Date.now());
  server.receivedAt = Date.now();
});
afterEach(() => vi.useRealTimers());

function outcome(validate: typeof validateReport, value: unknown) {
  try {
    return { ok: validate(value, server, options) };
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return { error: err.code, message: err.message, issues: err.extra.issues };
  }
}

describe("a report's usage", () => {
  it("is stored in three columns, and round-trips through the row", () => {
    const { record, warnings } = validateReport(
      { ...base, usage: { input_tokens: 1200, output_tokens: 80.4, cached_tokens: null, x: 1 } },
      server,
      options,
    );
    expect(warnings).toEqual([]);
    expect(record).toMatchObject({
      usage_input_tokens: 1200,
      usage_output_tokens: 80,
      usage_cached_tokens: null,
    });
    // A null optional column reads back as absent, as headers and error do.
    expect(fromRow(toRow(record))).toEqual({ ...record, usage_cached_tokens: undefined });
  });

  it("leaves a record without it (or with nothing in it) as the record it was", () => {
    for (const usage of [undefined, null, {}, { input_tokens: null }]) {
      const { record } = validateReport({ ...base, usage }, server, options);
      expect(Object.keys(record).filter((k) => k.startsWith("usage"))).toEqual([]);
    }
  });

  it(`stores a count below 0 or above ${MAX_USAGE_TOKENS} as null, with a warning`, () => {
    const { record, warnings } = validateReport(
      { ...base, usage: { input_tokens: -1, output_tokens: 1_000_000_001, cached_tokens: 7 } },
      server,
      options,
    );
    expect(record).toMatchObject({
      usage_input_tokens: null,
      usage_output_tokens: null,
      usage_cached_tokens: 7,
    });
    expect(warnings.map((w) => w.path)).toEqual(["usage.input_tokens", "usage.output_tokens"]);
    expect(
      validateReport({ ...base, usage: { input_tokens: 1e9 } }, server, options).warnings,
    ).toEqual([]);
  });

  it("refuses a count of the wrong type, and a usage that is no object, as 400", () => {
    for (const usage of [{ input_tokens: "12" }, [1, 2], "none", 5]) {
      const o = outcome(validateReport, { ...base, usage });
      expect(o, JSON.stringify(usage)).toMatchObject({ error: "invalid_report" });
    }
  });

  it("gives on the edge's fast path what the schema gives, for any usage", () => {
    const count = fc.oneof(
      fc.integer({ min: 0, max: 5_000 }),
      fc.integer({ min: -10, max: MAX_USAGE_TOKENS + 10 }),
      fc.double(),
      fc.constantFrom(null, undefined, "1", true, 2 ** 53, -0),
    );
    const usage = fc.oneof(
      fc.constant(undefined),
      fc.constant(null),
      fc.record(
        { input_tokens: count, output_tokens: count, cached_tokens: count, extra: count },
        { requiredKeys: [] },
      ),
      fc.jsonValue({ maxDepth: 2 }),
    );
    fc.assert(
      fc.property(usage, (u) => {
        const value = JSON.parse(JSON.stringify({ ...base, usage: u }));
        expect(outcome(validateReport, value)).toStrictEqual(
          outcome(validateReportBySchema, value),
        );
      }),
      { numRuns: 2_000 },
    );
  });
});
