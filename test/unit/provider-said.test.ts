import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { validateReport } from "../../src/edge/parse-report.js";
import { isRateLimitHeader } from "../../src/providers/keep-headers.js";
import {
  MAX_ERROR_DEPTH,
  MAX_ERROR_LENGTH,
  MAX_HEADER_NAME,
  MAX_HEADER_VALUE,
  MAX_KEPT_HEADERS,
  readProviderSaid,
} from "../../src/report/provider-said.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";

// A report's `headers` and `error` (docs/report-api.md): the allowlisted headers kept, within
// bounds, as compact JSON; an unusable one is a warning, never a refused report.

const server = {
  reportId: "0190a000-0000-7000-8000-000000000001",
  projectId: "p",
  keyId: "k",
  receivedAt: Date.now(),
};
const limits = { requests_limit: 10 };

describe("readProviderSaid", () => {
  it("keeps the allowlisted headers, lowercased, from an object or [name, value] pairs", () => {
    const sent = { "X-RateLimit-Limit-Requests": "60", "Set-Cookie": "s=1", "retry-after": 5 };
    expect(readProviderSaid({ headers: sent })).toEqual({
      headers: '{"x-ratelimit-limit-requests":"60","retry-after":"5"}',
      error: null,
      values: { headers: { "x-ratelimit-limit-requests": "60", "retry-after": "5" }, error: null },
      warnings: [],
    });
    const pairs = [
      ["x-ratelimit-limit-tokens", "1"],
      ["X-RateLimit-Limit-Tokens", "2"],
      ["cookie", "c"],
    ];
    expect(readProviderSaid({ headers: pairs }).headers).toBe(
      '{"x-ratelimit-limit-tokens":"1, 2"}',
    );
  });

  it("drops what is over a bound with a warning that names no header", () => {
    const many = Object.fromEntries(
      Array.from({ length: MAX_KEPT_HEADERS + 3 }, (_, i) => [`x-ratelimit-n${i}`, "1"]),
    );
    many["x-ratelimit-long"] = "9".repeat(MAX_HEADER_VALUE + 1);
    const said = readProviderSaid({ headers: many });
    expect(Object.keys(JSON.parse(said.headers ?? "{}"))).toHaveLength(MAX_KEPT_HEADERS);
    expect(said.warnings.map((w) => w.path)).toEqual(["headers", "headers"]);
    expect(JSON.stringify(said.warnings)).not.toContain("x-ratelimit-");
  });

  it("keeps at most 64 headers, names of 128 and values of 512 characters (the documented bounds)", () => {
    expect([MAX_KEPT_HEADERS, MAX_HEADER_NAME, MAX_HEADER_VALUE]).toEqual([64, 128, 512]);
    const name128 = `x-ratelimit-${"a".repeat(116)}`;
    const value512 = "9".repeat(512);
    const within = readProviderSaid({ headers: { [name128]: "1", "retry-after": value512 } });
    expect(within.values.headers).toEqual({ [name128]: "1", "retry-after": value512 });
    expect(within.warnings).toEqual([]);

    const over = readProviderSaid({
      headers: { [`${name128}a`]: "1", "retry-after": `${value512}9`, "x-ratelimit-ok": "2" },
    });
    expect(over.values.headers).toEqual({ "x-ratelimit-ok": "2" });
    expect(over.warnings).toEqual([
      {
        path: "headers",
        message:
          "2 rate-limit header(s) with a name over 128 or a value over 512 characters: dropped",
      },
    ]);
    // Two values of one name are one header, bounded once joined: 255 + ", " + 255 = 512.
    const joined = readProviderSaid({
      headers: [
        ["retry-after", "1".repeat(255)],
        ["Retry-After", "2".repeat(255)],
      ],
    });
    expect(joined.values.headers?.["retry-after"]).toHaveLength(512);

    const headers = (n: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-ratelimit-w${i}`, "1"]));
    const sixtyFour = readProviderSaid({ headers: headers(64) });
    expect(Object.keys(sixtyFour.values.headers ?? {})).toHaveLength(64);
    expect(sixtyFour.warnings).toEqual([]);
    const sixtyFive = readProviderSaid({ headers: headers(65) });
    expect(Object.keys(sixtyFive.values.headers ?? {})).toHaveLength(64);
    expect(sixtyFive.values.headers).not.toHaveProperty("x-ratelimit-w64");
    expect(sixtyFive.warnings).toEqual([
      { path: "headers", message: "more than 64 rate-limit headers: 1 dropped" },
    ]);
  });

  it("stores an error body as compact JSON, or null when too deep or too big", () => {
    expect(readProviderSaid({ error: { error: { code: 429 } } }).error).toBe(
      '{"error":{"code":429}}',
    );
    let deep: unknown = 1;
    for (let i = 0; i <= MAX_ERROR_DEPTH; i++) deep = [deep];
    expect(readProviderSaid({ error: deep })).toMatchObject({
      error: null,
      warnings: [{ path: "error" }],
    });
    const big = { message: "x".repeat(MAX_ERROR_LENGTH) };
    expect(readProviderSaid({ error: big })).toMatchObject({
      error: null,
      warnings: [{ path: "error" }],
    });
  });

  it("takes a body without either field as nothing said", () => {
    expect(readProviderSaid({ provider: "openai" })).toEqual({
      headers: null,
      error: null,
      values: { headers: null, error: null },
      warnings: [],
    });
  });

  it("keeps, for any headers sent, exactly the allowlist's headers within bounds, never refusing", () => {
    const name = fc.oneof(
      fc
        .constantFrom(
          "x-ratelimit-",
          "anthropic-ratelimit-",
          "set-cookie",
          "Retry-After",
          "RateLimit",
        )
        .chain((prefix) => fc.string({ maxLength: 20 }).map((s) => prefix + s)),
      fc.string({ maxLength: 40 }),
    );
    const value = fc.oneof(
      fc.string({ maxLength: 600 }),
      fc.integer(),
      fc.constant(null),
      fc.object(),
    );
    fc.assert(
      fc.property(fc.dictionary(name, value, { maxKeys: 100 }), (headers) => {
        const said = readProviderSaid({ headers });
        const kept =
          said.headers === null ? {} : (JSON.parse(said.headers) as Record<string, string>);
        // The documented bounds, as literals (docs/report-api.md).
        for (const [n, v] of Object.entries(kept)) {
          expect(isRateLimitHeader(n)).toBe(true);
          expect(n).toBe(n.toLowerCase());
          expect(n.length).toBeLessThanOrEqual(128);
          expect(v.length).toBeLessThanOrEqual(512);
        }
        expect(Object.keys(kept).length).toBeLessThanOrEqual(64);
        const report = validateReport({ provider: "openai", limits, headers }, server, {
          retentionDays: 30,
        });
        expect(report.record.headers ?? null).toBe(said.headers);
      }),
    );
  });
});

describe("the record", () => {
  it("gives the kept headers and error as values equal to what their texts parse to", () => {
    const headerValue = fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.constant(null));
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.constantFrom("x-ratelimit-remaining-tokens", "Retry-After", "cookie", "RateLimit"),
          headerValue,
        ),
        fc.option(fc.jsonValue({ maxDepth: 20 }), { nil: undefined }),
        (headers, error) => {
          // As the edge receives them: from JSON.
          const said = readProviderSaid(JSON.parse(JSON.stringify({ headers, error })));
          const parse = (t: string | null) => (t === null ? null : JSON.parse(t));
          expect(said.values).toStrictEqual({
            headers: parse(said.headers),
            error: parse(said.error),
          });
        },
      ),
    );
  });

  it("carries headers and error after the contract's fields, from row shape 2 on", () => {
    const { record, warnings } = validateReport(
      {
        provider: "anthropic",
        limits,
        headers: { "retry-after": "1", "x-request-id": "r" },
        error: [1],
      },
      server,
      { retentionDays: 30 },
    );
    expect(warnings).toEqual([]);
    expect(record).toMatchObject({ headers: '{"retry-after":"1"}', error: "[1]" });
    expect(ROW_SHAPES.columnsOf(2).slice(-2)).toEqual(["headers", "error"]);
    expect(ROW_SHAPES.columns.slice(17, 19)).toEqual(["headers", "error"]);
  });

  it("accepts a report whose headers are no headers, with a warning", () => {
    const { record, warnings } = validateReport(
      { provider: "openai", limits, headers: "x" },
      server,
      {
        retentionDays: 30,
      },
    );
    expect(record.headers ?? null).toBeNull();
    expect(warnings).toMatchObject([{ path: "headers" }]);
  });

  it("reads a shape-1 job row as shape 2 with nothing said", () => {
    const row = ROW_SHAPES.columns.slice(0, -2).map((c) => c);
    expect(ROW_SHAPES.upgrade(1, [row])[0]?.slice(-2)).toEqual([null, null]);
  });
});
