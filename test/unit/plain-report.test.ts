import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { NULL_LIMITS, sampleBody } from "../../fixtures/sample-reports.js";
import {
  parseJsonBody,
  type ValidReport,
  validateReport,
  validateReportBySchema,
} from "../../src/edge/parse-report.js";
import { HttpError } from "../../src/http/errors.js";
import { plainReportBody } from "../../src/report/plain-report.js";
import { reportBodySchema, toRecord } from "../../src/report/report-schema.js";
import {
  EDGE_CASES,
  type Mutation,
  mostly,
  mutations,
  render,
  reports,
} from "../helpers/report-arbitraries.js";

// The fast path of report validation (plain-report.ts) against the schema, which stays the
// reference: for any JSON value the edge would validate, validateReport gives exactly what
// validateReportBySchema gives (record, warnings, or the error with its issues).

const DAY_MS = 86_400_000;
const server = {
  reportId: "01900000-0000-7000-8000-000000000001",
  projectId: "prj_1",
  keyId: "key_1",
  receivedAt: 0,
};
const options = { retentionDays: 365 };

type Outcome = { ok: ValidReport } | { error: string; message: string; issues: unknown };

function outcome(validate: typeof validateReport, value: unknown): Outcome {
  try {
    return { ok: validate(value, server, options) };
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return { error: err.code, message: err.message, issues: err.extra.issues };
  }
}

/** The JSON value the edge would hand to validation, or undefined when the body is refused. */
function parsed(text: string): unknown {
  try {
    return parseJsonBody(Buffer.from(text));
  } catch {
    return undefined;
  }
}

beforeEach(() => {
  // Both paths read the clock for the timestamp's window: one instant for both.
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(Date.now());
  server.receivedAt = Date.now();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("plainReportBody", () => {
  it("takes the reports the real client sends", () => {
    for (let i = 0; i < 200; i++) {
      const body = sampleBody(i);
      expect(plainReportBody(body), JSON.stringify(body)).not.toBeNull();
    }
  });

  it("gives what the schema gives for the reports it takes", () => {
    const body = {
      provider: " OpenAI ",
      app: "  chat ",
      model: "gpt-4o",
      timestamp: "2024-02-29T23:59:59.5+05:30",
      limits: { ...NULL_LIMITS, requests_limit: 2.5, tokens_remaining: -0.5, extra: "x" },
      credits: { credits_limit: 100, request_cost: 1e-7 },
      extra: { nested: true },
    };
    const plain = plainReportBody(body);
    expect(plain).not.toBeNull();
    const schema = reportBodySchema.parse(body);
    expect(toRecord(plain as NonNullable<typeof plain>, server)).toStrictEqual(
      toRecord(schema, server),
    );
  });

  it("leaves to the schema whatever it would fix or refuse", () => {
    const base = { provider: "openai", limits: {} };
    for (const changed of [
      { provider: "   " },
      { provider: "x".repeat(65) },
      { provider: "\uD800" },
      { app: "a".repeat(129) },
      { app: 1 },
      { model: "" },
      { model: "m".repeat(257) },
      { timestamp: "yesterday" },
      { timestamp: new Date(Date.now() + 2 * DAY_MS).toISOString() },
      { timestamp: 1 },
      { limits: [] },
      { limits: { requests_limit: "1" } },
      { limits: { requests_limit: 2 ** 63 } },
      { limits: { requests_limit: Number.NaN } },
      { credits: { request_cost: 1e21 } },
      { credits: [] },
      { credits: "none" },
    ]) {
      expect(plainReportBody({ ...base, ...changed }), JSON.stringify(changed)).toBeNull();
    }
    expect(plainReportBody([base])).toBeNull();
    expect(plainReportBody(Object.assign(Object.create({ extra: 1 }), base))).toBeNull();
  });
});

describe("validateReport equals validateReportBySchema", () => {
  it("on valid, lenient and invalid reports, mutated as JSON text", () => {
    let fast = 0;
    fc.assert(
      fc.property(
        reports.map((r): Record<string, unknown> => r),
        mostly(fc.constant<Mutation[]>([]), fc.array(mutations, { minLength: 1, maxLength: 3 })),
        (report, muts) => {
          const value = parsed(render(report, muts));
          if (value === undefined) return;
          if (plainReportBody(value)) fast += 1;
          expect(outcome(validateReport, value)).toStrictEqual(
            outcome(validateReportBySchema, value),
          );
        },
      ),
      {
        numRuns: 3_000,
        examples: EDGE_CASES.map((report): [Record<string, unknown>, Mutation[]] => [report, []]),
      },
    );
    // The generators reach both paths.
    expect(fast).toBeGreaterThan(300);
  });

  it("on any JSON value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(outcome(validateReport, value)).toStrictEqual(
          outcome(validateReportBySchema, value),
        );
      }),
      { numRuns: 1_000 },
    );
  });

  it("on reports older than the retention, and at its edge", () => {
    for (const age of [0, 1, 364 * DAY_MS, 365 * DAY_MS, 365 * DAY_MS + 1, 400 * DAY_MS]) {
      const value = {
        provider: "openai",
        limits: {},
        timestamp: new Date(server.receivedAt - age).toISOString(),
      };
      expect(outcome(validateReport, value)).toStrictEqual(outcome(validateReportBySchema, value));
    }
  });
});
