import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH, parseJsonBody, validateReport } from "../../src/edge/parse-report.js";
import { HttpError } from "../../src/http/errors.js";

// Body bytes → JSON value → normalised record, with the contract's error codes and issue paths.

/** The HttpError thrown by `fn`, for its code, status, message and issues. */
function refusal(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HttpError) return err;
    throw err;
  }
  throw new Error("expected an HttpError, nothing was thrown");
}

const bytes = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));

/** `depth` objects nested in one another: `{"a":{"a":...{}}}`. */
const nested = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${"}".repeat(depth - 1)}`;

describe("parseJsonBody", () => {
  it("returns the parsed value of a valid body", () => {
    const value = { provider: "openai", limits: { requests_limit: 1 }, model: "gpt-ø" };
    expect(parseJsonBody(Buffer.from(JSON.stringify(value)))).toEqual(value);
  });

  it("refuses an empty body as invalid_json", () => {
    const err = refusal(() => parseJsonBody(Buffer.alloc(0)));
    expect(err.code).toBe("invalid_json");
    expect(err.status).toBe(400);
  });

  it("refuses text that is not JSON as invalid_json", () => {
    for (const text of ["{", "   ", "{'provider': 1}", '{"a":1}}', "NaN", "undefined"]) {
      expect(refusal(() => parseJsonBody(Buffer.from(text))).code, text).toBe("invalid_json");
    }
  });

  it("refuses invalid UTF-8 bytes inside a string, naming its path", () => {
    const err = refusal(() =>
      parseJsonBody(bytes('{"provider":"openai","limits":{},"model":"gpt', [0xff, 0xfe], '"}')),
    );
    expect(err.code).toBe("invalid_report");
    expect(err.extra.issues).toEqual([{ path: "model", message: "must be valid UTF-8" }]);
  });

  it("refuses invalid UTF-8 bytes inside a key", () => {
    const err = refusal(() => parseJsonBody(bytes('{"limits":{"x', [0xc3], '":1}}')));
    expect(err.code).toBe("invalid_report");
    expect(err.extra.issues).toEqual([{ path: "limits.x\uFFFD", message: "must be valid UTF-8" }]);
  });

  it("refuses invalid UTF-8 in an array element and at the top level", () => {
    const inArray = refusal(() => parseJsonBody(bytes('{"tags":["ok","b', [0x80], 'd"]}')));
    expect(inArray.extra.issues).toEqual([{ path: "tags.1", message: "must be valid UTF-8" }]);
    const topLevel = refusal(() => parseJsonBody(bytes('"', [0xed, 0xa0, 0x80], '"')));
    expect(topLevel.code).toBe("invalid_report");
    expect(topLevel.extra.issues?.[0]?.path).toBe("(body)");
  });

  it("accepts a real U+FFFD character sent as valid UTF-8", () => {
    expect(parseJsonBody(Buffer.from('{"model":"\uFFFD"}'))).toEqual({ model: "\uFFFD" });
  });

  it("refuses __proto__, constructor and prototype keys at any depth", () => {
    const cases: [string, string][] = [
      ['{"__proto__":{"admin":true}}', "__proto__"],
      ['{"limits":{"constructor":{"prototype":1}}}', "limits.constructor"],
      ['{"credits":[{"prototype":1}]}', "credits.0.prototype"],
    ];
    for (const [text, path] of cases) {
      const err = refusal(() => parseJsonBody(Buffer.from(text)));
      expect(err.code, text).toBe("invalid_report");
      expect(err.extra.issues, text).toEqual([{ path, message: "forbidden key" }]);
      expect(err.message).toBe(`${path}: forbidden key`);
    }
  });

  it("refuses a prototype key written with escapes", () => {
    const text = String.raw`{"provider":"openai","\u005f_proto__":{"polluted":1}}`;
    const err = refusal(() => parseJsonBody(Buffer.from(text)));
    expect(err.extra.issues).toEqual([{ path: "__proto__", message: "forbidden key" }]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it(`accepts nesting up to ${MAX_JSON_DEPTH} levels and refuses one more`, () => {
    expect(() => parseJsonBody(Buffer.from(nested(MAX_JSON_DEPTH)))).not.toThrow();
    const err = refusal(() => parseJsonBody(Buffer.from(nested(MAX_JSON_DEPTH + 1))));
    expect(err.code).toBe("invalid_report");
    expect(err.extra.issues).toEqual([
      {
        path: Array(MAX_JSON_DEPTH).fill("a").join("."),
        message: `nested deeper than ${MAX_JSON_DEPTH} levels`,
      },
    ]);
  });

  it("refuses very deep nesting of arrays without overflowing the stack", () => {
    const depth = 50_000;
    const err = refusal(() =>
      parseJsonBody(Buffer.from(`${"[".repeat(depth)}${"]".repeat(depth)}`)),
    );
    expect(err.code).toBe("invalid_report");
    expect(err.extra.issues).toHaveLength(1);
  });
});

describe("validateReport", () => {
  const server = {
    reportId: "01900000-0000-7000-8000-000000000002",
    projectId: "prj_1",
    keyId: "key_1",
    receivedAt: Date.UTC(2024, 4, 1, 10),
  };
  const window = { retentionDays: 400 };

  it("stores a reset past a year either way as null, with a warning; takes a year", () => {
    const year = 31_536_000_000;
    const { record, warnings } = validateReport(
      { provider: "openai", limits: { reset_requests_ms: 9e15, reset_tokens_ms: -(year + 1) } },
      server,
      window,
    );
    expect(record).toMatchObject({ reset_requests_ms: null, reset_tokens_ms: null });
    expect(warnings).toEqual([
      { path: "limits.reset_requests_ms", message: expect.stringMatching(/within a year.*null/) },
      { path: "limits.reset_tokens_ms", message: expect.stringMatching(/within a year.*null/) },
    ]);
    const kept = validateReport(
      { provider: "openai", limits: { reset_requests_ms: year, reset_tokens_ms: -year } },
      server,
      window,
    );
    expect(kept.record).toMatchObject({ reset_requests_ms: year, reset_tokens_ms: -year });
    expect(kept.warnings).toEqual([]);
  });

  it("stores unusable optional values as null or cut, and says so in warnings", () => {
    const { record, warnings } = validateReport(
      {
        provider: "openai",
        model: "",
        app: "a".repeat(130),
        timestamp: "1999-01-01T00:00:00Z",
        limits: { requests_limit: 1e19, tokens_limit: 5 },
        credits: { credits_limit: -1e21, request_cost: 0.5 },
      },
      server,
      window,
    );
    expect(record).toMatchObject({
      model: null,
      app: "a".repeat(128),
      timestamp: "2024-05-01T10:00:00.000Z",
      requests_limit: null,
      tokens_limit: 5,
      credits_limit: null,
      request_cost: 0.5,
    });
    expect(warnings.map((w) => w.path).sort()).toEqual([
      "app",
      "credits.credits_limit",
      "limits.requests_limit",
      "model",
      "timestamp",
    ]);
  });

  it("refuses wrong types even beside unusable values, naming only the wrong types", () => {
    expect(() =>
      validateReport(
        { provider: "openai", model: "", limits: { tokens_limit: "5" } },
        server,
        window,
      ),
    ).toThrow(
      expect.objectContaining({
        code: "invalid_report",
        message: expect.stringMatching(/^limits.tokens_limit/),
      }),
    );
  });

  it("returns the normalised record with the server's fields", () => {
    const { record, warnings } = validateReport(
      { provider: " Anthropic ", limits: { tokens_limit: 1.6 }, extra: 1 },
      server,
      window,
    );
    expect(record).toMatchObject({
      report_id: server.reportId,
      project_id: "prj_1",
      key_id: "key_1",
      provider: "anthropic",
      app: "default",
      model: null,
      tokens_limit: 2,
      timestamp: "2024-05-01T10:00:00.000Z",
    });
    expect(record).not.toHaveProperty("extra");
    expect(warnings).toEqual([]);
  });

  it("refuses a broken report as invalid_report with every issue and its path", () => {
    const err = refusal(() =>
      validateReport(
        { limits: { requests_limit: "10" }, credits: { request_cost: "0.1" } },
        server,
        window,
      ),
    );
    expect(err.code).toBe("invalid_report");
    expect(err.status).toBe(400);
    expect(err.extra.issues?.map((i) => i.path).sort()).toEqual([
      "credits.request_cost",
      "limits.requests_limit",
      "provider",
    ]);
    const first = err.extra.issues?.[0];
    expect(err.message).toBe(`${first?.path}: ${first?.message}`);
    expect(err.toBody()).toMatchObject({ error: "invalid_report", issues: err.extra.issues });
  });

  it('names the body itself "(body)" when it is not an object', () => {
    for (const value of [null, [], "text", 1]) {
      const err = refusal(() => validateReport(value, server, window));
      expect(err.extra.issues).toEqual([{ path: "(body)", message: "expected a JSON object" }]);
    }
  });
  it("stores a report older than the retention at its receive time, with a warning", () => {
    const day = 24 * 60 * 60 * 1000;
    const at = (ms: number) => new Date(ms).toISOString();
    const kept = validateReport(
      { provider: "openai", limits: {}, timestamp: at(server.receivedAt - 400 * day) },
      server,
      window,
    );
    expect(kept.record.timestamp).toBe(at(server.receivedAt - 400 * day));
    expect(kept.warnings).toEqual([]);
    const old = validateReport(
      { provider: "openai", limits: {}, timestamp: at(server.receivedAt - 400 * day - 1) },
      server,
      window,
    );
    expect(old.record.timestamp).toBe(at(server.receivedAt));
    expect(old.warnings).toEqual([
      {
        path: "timestamp",
        message: "older than the retention of 400 days: stored as the receive time",
      },
    ]);
  });
});
