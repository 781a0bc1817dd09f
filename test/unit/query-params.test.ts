import { describe, expect, it } from "vitest";
import { toBindValue } from "../../src/local/clickhouse/query-params.js";

// HTTP `param_<name>` values come in ClickHouse's escaped text format; chdb's bind escapes
// strings again itself. toBindValue must hand chdb the value that reads back as the original.

describe("toBindValue", () => {
  it("passes values without backslashes through unchanged", () => {
    expect(toBindValue("hello", "String")).toBe("hello");
    expect(toBindValue("42", "UInt32")).toBe("42");
    expect(toBindValue("['a','b']", "Array(String)")).toBe("['a','b']");
    expect(toBindValue("", "String")).toBe("");
  });

  it("reads \\N as NULL", () => {
    expect(toBindValue("\\N", "Nullable(String)")).toBeNull();
    expect(toBindValue("\\N", undefined)).toBeNull();
  });

  it("unescapes the escape sequences of a scalar", () => {
    expect(toBindValue("a\\tb\\nc", "String")).toBe("a\tb\nc");
    expect(toBindValue("back\\\\slash", "String")).toBe("back\\slash");
    expect(toBindValue("it\\'s", "String")).toBe("it's");
    expect(toBindValue("\\x41\\x7a", "String")).toBe("Az");
    expect(toBindValue("\\0\\b\\f\\r\\a\\v\\e", "String")).toBe("\0\b\f\r\x07\v\x1b");
  });

  it("keeps an unknown escape's character, and a lone trailing backslash", () => {
    expect(toBindValue("\\q", "String")).toBe("q");
    expect(toBindValue("end\\", "String")).toBe("end\\");
    expect(toBindValue("\\xZZ", "String")).toBe("xZZ");
  });

  it("re-quotes composite literals so no backslash is left for chdb to double", () => {
    expect(toBindValue("['it\\'s','a\\\\b']", "Array(String)")).toBe("['it''s','a\\b']");
    expect(toBindValue("{'k\\'':'v\\tw'}", "Map(String, String)")).toBe("{'k''':'v\tw'}");
    expect(toBindValue("('a\\'b', 1)", "Tuple(String, UInt8)")).toBe("('a''b', 1)");
    expect(toBindValue("['x''y\\n']", "Array(String)")).toBe("['x''y\n']");
  });

  it("treats wrapped composite types as composite", () => {
    expect(toBindValue("['a\\'b']", "Nullable(Array(String))")).toBe("['a''b']");
    expect(toBindValue("['a\\'b']", " LowCardinality(Array(String))")).toBe("['a''b']");
  });

  it("unescapes the whole value when the type is unknown", () => {
    expect(toBindValue("['a\\'b']", undefined)).toBe("['a'b']");
  });
});
