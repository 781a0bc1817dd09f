import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cellsOf, type WindowCells } from "../../src/clickhouse/report-windows.js";
import {
  arrayOf,
  type EncodeReports,
  REPORT_COLUMN_WRITERS,
  RowBinaryWriter,
  reportRowBinary,
  writeDecimal38_12,
  writeFloat64,
  writeInt64,
  writeNullableString,
  writeString,
  writeTime,
  writeUuid,
} from "../../src/clickhouse/row-binary.js";
import type { ReportRow } from "../../src/report/report-schema.js";
import { ROW_SHAPE_HISTORY, ROW_SHAPES } from "../../src/report/row-shapes.js";
import { derivedWindows, reportRows } from "../helpers/report-row-arbitraries.js";

// The RowBinary encoder, against values written out by hand (the layouts ClickHouse documents and
// that report-sink's integration test checks against ClickHouse's JSON parse), and as a property:
// every row it takes decodes back to what ClickHouse's JSON parse stores for it.

type Write = (w: RowBinaryWriter, v: unknown) => boolean;
const hex = (write: Write, v: unknown) => {
  const w = new RowBinaryWriter(4);
  expect(write(w, v)).toBe(true);
  return w.bytes().toString("hex");
};
const refuses = (write: Write, v: unknown) => write(new RowBinaryWriter(), v);

describe("RowBinary values", () => {
  it("writes a UUID as two little-endian UInt64 halves", () => {
    expect(hex(writeUuid, "01234567-89ab-cdef-0123-456789abcdef")).toBe(
      "efcdab8967452301efcdab8967452301",
    );
    expect(hex(writeUuid, "01234567-89AB-CDEF-0123-456789ABCDEF")).toBe(
      "efcdab8967452301efcdab8967452301",
    );
  });

  it("writes strings as a LEB128 length and UTF-8, null in a String column as ''", () => {
    expect(hex(writeString, "é😀")).toBe("06c3a9f09f9880");
    expect(hex(writeString, "a\u0000b")).toBe("03610062");
    expect(hex(writeString, "a".repeat(200)).slice(0, 6)).toBe("c80161");
    expect(hex(writeString, "é".repeat(100)).slice(0, 6)).toBe("c801c3");
    expect(hex(writeString, null)).toBe("00");
    expect(hex(writeNullableString, null)).toBe("01");
    expect(hex(writeNullableString, "")).toBe("0000");
  });

  it("writes Int64 as ClickHouse reads the JSON text of the value", () => {
    expect(hex(writeInt64, -1)).toBe("ffffffffffffffff");
    expect(hex(writeInt64, -(2 ** 32))).toBe("00000000ffffffff");
    expect(hex(writeInt64, -0)).toBe("0000000000000000");
    // 2^63 - 1024 is sent as 9223372036854775000, not the double's 9223372036854774784.
    const w = new RowBinaryWriter();
    writeInt64(w, 2 ** 63 - 1024);
    expect(w.bytes().readBigInt64LE()).toBe(9223372036854775000n);
    expect(hex(writeInt64, "-9223372036854775808")).toBe("0000000000000080");
    expect(hex(writeInt64, "9223372036854775807")).toBe("ffffffffffffff7f");
  });

  it("writes Decimal(38, 12) as the exact Int128 of value × 10^12", () => {
    expect(hex(writeDecimal38_12, "-0.000000000001")).toBe("ff".repeat(16));
    expect(hex(writeDecimal38_12, "-0.000000000000")).toBe("00".repeat(16));
    expect(hex(writeDecimal38_12, "1.5")).toBe(hex(writeDecimal38_12, "1.500000000000"));
    expect(hex(writeDecimal38_12, 0.1)).toBe(hex(writeDecimal38_12, "0.1"));
    const w = new RowBinaryWriter();
    writeDecimal38_12(w, "-99999999999999999999999999.999999999999");
    const b = w.bytes();
    expect(b.readBigUInt64LE(0) + (b.readBigInt64LE(8) << 64n)).toBe(-(10n ** 38n - 1n));
  });

  it("writes DateTime64(3) as Int64 ms and Float64 with -0 as 0", () => {
    expect(hex(writeTime, "1969-12-31 23:59:59.999")).toBe("ffffffffffffffff");
    expect(hex(writeTime, "1970-01-01 00:00:01.234")).toBe("d204000000000000");
    expect(hex(writeFloat64, -0)).toBe("0000000000000000");
  });

  it("refuses what it cannot write as JSON would have stored it", () => {
    for (const v of ["0.0000000000001", "1e-7", 1e-7, "1.", ".5", "+1", true, Number.NaN])
      expect(refuses(writeDecimal38_12, v), String(v)).toBe(false);
    for (const v of [1.5, 2 ** 63, "9223372036854775808", "1e3", "+5", "", true, Number.NaN])
      expect(refuses(writeInt64, v), String(v)).toBe(false);
    for (const v of [
      "2024-02-30 00:00:00.000",
      "2024-01-01T00:00:00.000Z",
      "2024-01-01 24:00:00.000",
      "1899-12-31 23:59:59.999",
      "2300-01-01 00:00:00.000",
      "2024-01-01 00:00:00",
      null,
    ])
      expect(refuses(writeTime, v), String(v)).toBe(false);
    for (const v of ["not-a-uuid", "01234567-89ab-cdef-0123-456789abcdeg", null, 5])
      expect(refuses(writeUuid, v), String(v)).toBe(false);
    for (const v of ["\ud800", 5, ["a"]]) expect(refuses(writeString, v), String(v)).toBe(false);
    expect(refuses(writeFloat64, Number.POSITIVE_INFINITY)).toBe(false);
    expect(refuses(arrayOf(writeString), "a")).toBe(false);
  });
});

// ---- the property: decode and compare ----------------------------------------------------

class Reader {
  at = 0;
  constructor(readonly b: Buffer) {}
  u8 = () => this.b[this.at++] as number;
  leb = () => {
    let n = 0;
    for (let shift = 1; ; shift *= 128) {
      const byte = this.u8();
      n += (byte & 0x7f) * shift;
      if (byte < 0x80) return n;
    }
  };
  string = () => {
    const n = this.leb();
    this.at += n;
    return this.b.toString("utf8", this.at - n, this.at);
  };
  int64 = () => {
    this.at += 8;
    return this.b.readBigInt64LE(this.at - 8);
  };
  nullable =
    <T>(read: () => T) =>
    () =>
      this.u8() === 1 ? null : read();
  array =
    <T>(read: () => T) =>
    () =>
      Array.from({ length: this.leb() }, read);
}

/** What ClickHouse stores for a value of each column, as text (its JSON parse of the value). */
const time = (s: string) => BigInt(Date.parse(`${s.replace(" ", "T")}Z`));
function decimal(v: string | number): bigint {
  const [whole = "", frac = ""] = String(v).replace("-", "").split(".");
  const n = BigInt(whole + frac.padEnd(12, "0"));
  return String(v).startsWith("-") ? -n : n;
}
/** String columns other than the report id: an id, a one-word name, or what the provider said. */
const isText = (column: string) =>
  column !== "report_id" &&
  (column.endsWith("_id") ||
    !column.includes("_") ||
    ["headers", "error", "account", "pool"].includes(column));
function expected(column: string, v: unknown): unknown {
  if (v === null) return column === "app" || column === "model" ? "" : null;
  if (column === "report_id") return String(v).toLowerCase();
  if (column === "timestamp" || column === "received_at") return time(String(v));
  if (column.startsWith("credits") || column === "request_cost")
    return decimal(v as string | number);
  // A key id or model of digits is still text ("0" stays "0", not 0n).
  if (isText(column)) return v;
  if (
    typeof v === "number" ||
    (typeof v === "string" && /^-?\d+$/.test(v)) ||
    typeof v === "bigint"
  )
    return BigInt(String(v));
  return v;
}

function decodeRow(r: Reader, columns: readonly string[]): unknown[] {
  const uuid = () => {
    const a = Buffer.from(r.b.subarray(r.at, r.at + 8))
      .reverse()
      .toString("hex");
    const b = Buffer.from(r.b.subarray(r.at + 8, r.at + 16))
      .reverse()
      .toString("hex");
    r.at += 16;
    const h = a + b;
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  const int128 = () => {
    const lo = r.b.readBigUInt64LE(r.at);
    const hi = r.b.readBigInt64LE(r.at + 8);
    r.at += 16;
    return lo + (hi << 64n);
  };
  const float = () => {
    r.at += 8;
    return r.b.readDoubleLE(r.at - 8);
  };
  const readers: Record<string, () => unknown> = {
    report_id: uuid,
    timestamp: r.int64,
    received_at: r.int64,
    credits_limit: r.nullable(int128),
    credits_remaining: r.nullable(int128),
    request_cost: r.nullable(int128),
    headers: r.nullable(r.string),
    error: r.nullable(r.string),
    account: r.nullable(r.string),
    pool: r.nullable(r.string),
  };
  const row = columns.map((c) => (readers[c] ?? (isText(c) ? r.string : r.nullable(r.int64)))());
  const windows = [
    r.array(r.string)(),
    r.array(r.nullable(r.string))(),
    r.array(r.nullable(float))(),
    r.array(r.nullable(float))(),
    r.array(r.nullable(r.int64))(),
    r.string(),
  ];
  return [...row, ...windows];
}

const expectedWindows = (c: WindowCells) => [
  c[0],
  c[1],
  c[2].map((x) => (x === 0 ? 0 : x)),
  c[3].map((x) => (x === 0 ? 0 : x)),
  c[4].map((t) => (t === null ? null : time(t))),
  c[5],
];

describe("reportRowBinary", () => {
  const columns = ROW_SHAPES.columns;

  it("has a type for every column of every row shape", () => {
    for (const shape of Object.values(ROW_SHAPE_HISTORY))
      for (const c of shape) expect(REPORT_COLUMN_WRITERS[c], c).toBeDefined();
    // A column it has no type for: no encoder (the sink sends JSON).
    expect(reportRowBinary(["report_id", "new_column"])).toBeUndefined();
  });

  it("encodes any row the worker holds to what ClickHouse's JSON parse stores", () => {
    const encode = reportRowBinary(columns) as EncodeReports;
    fc.assert(
      fc.property(fc.array(fc.tuple(reportRows, derivedWindows), { maxLength: 8 }), (batch) => {
        const cells = new Map(batch.map(([row, d]) => [row, cellsOf(d)]));
        const bytes = encode(
          batch.map(([row]) => row),
          (row) => cells.get(row) as WindowCells,
        );
        expect(bytes).toBeInstanceOf(Buffer);
        const r = new Reader(bytes as Buffer);
        for (const [row] of batch) {
          const want = [
            ...columns.map((c, i) => expected(c, row[i])),
            ...expectedWindows(cells.get(row) as WindowCells),
          ];
          expect(decodeRow(r, columns)).toEqual(want);
        }
        expect(r.at).toBe((bytes as Buffer).length);
      }),
    );
  });

  it("gives the same bytes for the same rows, whatever it encoded between", () => {
    const encode = reportRowBinary(columns) as EncodeReports;
    const [a, b] = fc.sample(fc.array(reportRows, { minLength: 50, maxLength: 50 }), 2) as [
      ReportRow[],
      ReportRow[],
    ];
    const none = () => cellsOf({ windows: [], warnings: [], parser: "limits@1" });
    const first = encode(a, none) as Buffer;
    const copy = Buffer.from(first);
    encode(b, none);
    expect(encode(a, none)).toEqual(copy);
    // The buffer is reused: what a batch was given is its own copy.
    expect(first).toEqual(copy);
    expect((reportRowBinary(columns) as EncodeReports)(a, none)).toEqual(copy);
  });

  it("encodes no batch holding a value it cannot write exactly, or a row of another length", () => {
    const encode = reportRowBinary(columns) as EncodeReports;
    const none = () => cellsOf({ windows: [], warnings: [], parser: "limits@1" });
    const [row] = fc.sample(reportRows, 1) as [ReportRow];
    const cost = columns.indexOf("request_cost");
    expect(encode([row], none)).toBeInstanceOf(Buffer);
    expect(encode([row, Object.assign([...row], { [cost]: "1e-7" })], none)).toBeUndefined();
    expect(encode([row, [...row, null]], none)).toBeUndefined();
    expect(encode([row], () => [["a"], [], [], [], [], "p"])).toBeUndefined();
  });
});
