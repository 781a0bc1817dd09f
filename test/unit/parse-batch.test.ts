import { describe, expect, it } from "vitest";
import { parseBatchBody } from "../../src/edge/parse-batch.js";
import { HttpError } from "../../src/http/errors.js";

// A batch's envelope: refused whole only when broken; each item checked as a single body is.

const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err instanceof HttpError ? err.code : "not an HttpError";
  }
  return "no error";
};

const json = (text: string | Buffer, max = 10) =>
  parseBatchBody(Buffer.isBuffer(text) ? text : Buffer.from(text), "json", max);
const ndjson = (text: string, max = 10) => parseBatchBody(Buffer.from(text), "ndjson", max);
const errors = (items: ReturnType<typeof json>) =>
  items.map((i) => ("error" in i ? i.error.code : "ok"));

describe("JSON array envelopes", () => {
  it("broken envelopes: not JSON, not an array, too many items, empty", () => {
    expect(codeOf(() => json("[{"))).toBe("invalid_json");
    expect(codeOf(() => json('{"provider":"x"}'))).toBe("invalid_report");
    expect(codeOf(() => json("[1,2,3]", 2))).toBe("payload_too_large");
    expect(codeOf(() => json(""))).toBe("invalid_json");
  });

  it("a prototype key, escaped or not, is that item's error only", () => {
    const items = json('[{"a":1},{"__proto__":{}},{"\\u005f_proto__":1},{"b":2}]');
    expect(errors(items)).toEqual(["ok", "invalid_report", "invalid_report", "ok"]);
    // Each way of spelling one, alone in a batch.
    for (const key of [
      "__proto__",
      "constructor",
      "prototype",
      "\\u005f_proto__",
      "c\\u006fnstructor",
    ]) {
      expect(errors(json(`[{"a":1},{"limits":{"${key}":1}}]`)), key).toEqual([
        "ok",
        "invalid_report",
      ]);
    }
  });

  it("invalid UTF-8 inside one item's string is that item's error", () => {
    const body = Buffer.concat([
      Buffer.from('[{"a":"ok"},{"a":"'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}]'),
    ]);
    expect(errors(json(body))).toEqual(["ok", "invalid_report"]);
  });

  it("nesting: deep items are refused, brackets in strings neither hide nor invent depth", () => {
    const deep = `${'{"a":'.repeat(33)}1${"}".repeat(33)}`;
    const fine = `${'{"a":'.repeat(31)}1${"}".repeat(31)}`;
    expect(errors(json(`[${fine},${deep}]`))).toEqual(["ok", "invalid_report"]);
    expect(errors(json(`[{"s":"${"]".repeat(40)}"},${deep}]`))).toEqual(["ok", "invalid_report"]);
    expect(errors(json(`[{"s":"${"[".repeat(40)}"}]`))).toEqual(["ok"]);
  });
});

describe("NDJSON envelopes", () => {
  it("a broken line is that item's invalid_json; blank and CRLF lines are fine", () => {
    const items = ndjson('{"a":1}\r\n\n{"a":\n  \n{"b":2}');
    expect(errors(items)).toEqual(["ok", "invalid_json", "ok"]);
    expect(items[2]).toEqual({ value: { b: 2 } });
  });

  it("too many lines, or none, refuse the envelope", () => {
    expect(codeOf(() => ndjson("{}\n{}\n{}\n", 2))).toBe("payload_too_large");
    expect(codeOf(() => ndjson("\n \n"))).toBe("invalid_json");
  });
});
