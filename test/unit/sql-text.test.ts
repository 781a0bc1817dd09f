import { describe, expect, it } from "vitest";
import {
  firstKeyword,
  mentionsWord,
  parseSimpleInsert,
  placeholderTypes,
  secondStatementAt,
  splitInlineInsert,
  trailingFormat,
} from "../../src/local/clickhouse/sql-text.js";

// The embedded server's reading of SQL text: statement kind, a second statement, the output
// format, the simple INSERT shape. Comments and quoted text must never be taken for SQL.

describe("firstKeyword", () => {
  it.each([
    ["SELECT 1", "SELECT"],
    ["  select 1", "SELECT"],
    ["insert into t format JSONEachRow", "INSERT"],
    ["-- a comment\nSELECT 1", "SELECT"],
    ["/* block */ SET x = 1", "SET"],
    ["((SELECT 1))", "SELECT"],
    ["WITH 1 AS x SELECT x", "WITH"],
    ["", ""],
    ["   ", ""],
    ["-- only a comment", ""],
    ["123", ""],
  ])("%j → %j", (sql, keyword) => {
    expect(firstKeyword(sql)).toBe(keyword);
  });
});

describe("secondStatementAt", () => {
  it("is -1 for one statement, with or without trailing semicolons", () => {
    expect(secondStatementAt("SELECT 1")).toBe(-1);
    expect(secondStatementAt("SELECT 1;")).toBe(-1);
    expect(secondStatementAt("SELECT 1; ;  \n")).toBe(-1);
    expect(secondStatementAt("SELECT 1; -- done\n")).toBe(-1);
  });

  it("finds the semicolon before a second statement", () => {
    expect(secondStatementAt("SELECT 1; SELECT 2")).toBe(8);
    expect(secondStatementAt("SELECT 1;; DROP TABLE t")).toBe(8);
  });

  it("ignores semicolons in strings, identifiers and comments", () => {
    expect(secondStatementAt("SELECT ';' AS a")).toBe(-1);
    expect(secondStatementAt("SELECT 'it''s; fine'")).toBe(-1);
    expect(secondStatementAt("SELECT 'a\\'; b'")).toBe(-1);
    expect(secondStatementAt('SELECT 1 AS "x;y"')).toBe(-1);
    expect(secondStatementAt("SELECT 1 AS `x;y`")).toBe(-1);
    expect(secondStatementAt("SELECT 1 -- ; SELECT 2")).toBe(-1);
    expect(secondStatementAt("SELECT 1 /* ; SELECT 2 */")).toBe(-1);
  });

  it("sees a statement that follows a comment after the semicolon", () => {
    expect(secondStatementAt("SELECT 1; /* c */ SELECT 2")).toBe(8);
  });
});

describe("mentionsWord", () => {
  it("matches whole words, any case", () => {
    expect(mentionsWord("select 1 settings max_threads = 1", "SETTINGS")).toBe(true);
    expect(mentionsWord("SET max_threads = 1", "SET")).toBe(true);
    expect(mentionsWord("SELECT offset FROM t", "SET")).toBe(false);
    expect(mentionsWord("SELECT * FROM users", "USE")).toBe(false);
  });
});

describe("trailingFormat", () => {
  it.each([
    ["SELECT 1 FORMAT JSON", "JSON"],
    ["SELECT 1 format JSONEachRow;", "JSONEachRow"],
    ["SELECT 1 FORMAT CSV -- comment", "CSV"],
    ["SELECT 1 FORMAT TSV SETTINGS max_threads = 1", "TSV"],
    ["SELECT 1", undefined],
    ["SELECT 'FORMAT JSON' AS x, 1", undefined],
  ])("%j → %j", (sql, format) => {
    expect(trailingFormat(sql)).toBe(format);
  });
});

describe("parseSimpleInsert", () => {
  it("reads the statement @clickhouse/client writes", () => {
    expect(parseSimpleInsert("INSERT INTO db.t (a, b, c) FORMAT JSONCompactEachRow")).toEqual({
      table: "db.t",
      columns: ["a", "b", "c"],
      format: "JSONCompactEachRow",
    });
    expect(parseSimpleInsert("insert into table t format CSV;")).toEqual({
      table: "t",
      format: "CSV",
    });
    expect(parseSimpleInsert("INSERT INTO t (n.a, n.b) FORMAT TSV")?.columns).toEqual([
      "n.a",
      "n.b",
    ]);
  });

  it("declines anything else, so the general path handles it", () => {
    expect(parseSimpleInsert("INSERT INTO t VALUES (1)")).toBeUndefined();
    expect(parseSimpleInsert("INSERT INTO t SELECT 1")).toBeUndefined();
    expect(parseSimpleInsert("INSERT INTO t (`a b`) FORMAT CSV")).toBeUndefined();
    expect(parseSimpleInsert("INSERT INTO t (a) SETTINGS x=1 FORMAT CSV")).toBeUndefined();
    expect(parseSimpleInsert("INSERT INTO FUNCTION file('x') FORMAT CSV")).toBeUndefined();
    expect(parseSimpleInsert("SELECT 1")).toBeUndefined();
  });
});

describe("splitInlineInsert", () => {
  it("splits the statement line from the data bytes", () => {
    const data = Buffer.from([0x7b, 0x22, 0xff, 0x0a]);
    const body = Buffer.concat([Buffer.from("INSERT INTO t FORMAT JSONEachRow\n"), data]);
    const split = splitInlineInsert(body);
    expect(split?.sql).toBe("INSERT INTO t FORMAT JSONEachRow");
    expect(split?.data.equals(data)).toBe(true);
  });

  it("accepts CRLF and trailing blanks after the format", () => {
    const split = splitInlineInsert(Buffer.from("INSERT INTO t FORMAT CSV \t\r\n1,2\n"));
    expect(split?.sql).toBe("INSERT INTO t FORMAT CSV");
    expect(split?.data.toString()).toBe("1,2\n");
  });

  it("keeps a UTF-8 statement intact", () => {
    const split = splitInlineInsert(Buffer.from("INSERT INTO `tâble` FORMAT CSV\n1\n"));
    expect(split?.sql).toBe("INSERT INTO `tâble` FORMAT CSV");
  });

  it("is undefined when the body is not an inline insert", () => {
    expect(splitInlineInsert(Buffer.from("SELECT 1"))).toBeUndefined();
    expect(splitInlineInsert(Buffer.from("INSERT INTO t VALUES (1)\n"))).toBeUndefined();
    expect(splitInlineInsert(Buffer.from("INSERT INTO t FORMAT CSV"))).toBeUndefined();
  });
});

describe("placeholderTypes", () => {
  it("maps each {name:Type} to its type", () => {
    const types = placeholderTypes(
      "SELECT * FROM t WHERE a = {a:String} AND b IN {ids: Array(UUID)} AND c = {c:Nullable(Int64)}",
    );
    expect(Object.fromEntries(types)).toEqual({
      a: "String",
      ids: "Array(UUID)",
      c: "Nullable(Int64)",
    });
  });

  it("finds none in plain SQL", () => {
    expect(placeholderTypes("SELECT {}, map('a', 1)").size).toBe(0);
  });
});
