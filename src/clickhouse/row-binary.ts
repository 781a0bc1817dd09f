import type { ReportRow } from "../report/report-schema.js";
import type { WindowCells } from "./report-windows.js";

// Report rows and their windows as ClickHouse RowBinary, the insert format ClickHouse parses
// fastest: each value as its column's bytes (https://clickhouse.com/docs/interfaces/formats/RowBinary),
// written into one buffer that grows and is reused from batch to batch.
//
// RowBinary stores what it is given; JSONCompactEachRow, the format it replaces, has ClickHouse
// parse text, and some texts it takes in ways no one would guess (13 decimals truncated, an
// integer past Int64 wrapped round, `true` as 1, an impossible date moved). So a value is written
// only when its bytes are exactly what ClickHouse's JSON parse stores for it; for any other value
// the batch is not encoded (undefined), and the sink sends it as JSON, as before: ClickHouse
// stores it or refuses it as it always did, and a refused batch is split as always.

/** Writes one column's value; false when the value is not one this encoder writes exactly. */
type Write = (w: RowBinaryWriter, value: unknown) => boolean;

const TWO_32 = 2 ** 32;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INT128_SPAN = 2n ** 128n;
const MASK_64 = 2n ** 64n - 1n;
/** DateTime64(3)'s range; a time outside it is not written (the same bounds as report-windows.ts). */
const MIN_TIME_MS = Date.UTC(1900, 0, 1);
const MAX_TIME_MS = Date.UTC(2300, 0, 1) - 1;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
/** Integer text ClickHouse reads into Int64 from a JSON number or string. */
const INTEGER_TEXT = /^-?\d{1,19}$/;
/** Decimal text Decimal(38, 12) holds exactly: at most 26 digits before the point, 12 after. */
const DECIMAL_TEXT = /^(-?)(\d{1,26})(?:\.(\d{1,12}))?$/;
const DECIMAL_SCALE = 12;

/** A growing byte buffer with RowBinary's primitive writes. */
export class RowBinaryWriter {
  buf: Buffer;
  pos = 0;

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  reset(): void {
    this.pos = 0;
  }

  /** Room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** The bytes written, copied out (the buffer is reused by the next batch). */
  bytes(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.pos));
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  leb128(n: number): void {
    this.ensure(10);
    while (n >= 0x80) {
      this.buf[this.pos++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.pos++] = n;
  }

  /** A safe integer as Int64, little-endian. */
  int64(n: number): void {
    this.ensure(8);
    // `>>> 0` is the low 32 bits of the two's complement for any integer; floor() the high.
    this.buf.writeUInt32LE(n >>> 0, this.pos);
    this.buf.writeInt32LE(Math.floor(n / TWO_32), this.pos + 4);
    this.pos += 8;
  }

  bigInt64(n: bigint): void {
    this.ensure(8);
    this.buf.writeBigInt64LE(n, this.pos);
    this.pos += 8;
  }

  /** A signed 128-bit integer, little-endian (Decimal128's layout). */
  int128(n: bigint): void {
    const u = n < 0n ? INT128_SPAN + n : n;
    this.ensure(16);
    this.buf.writeBigUInt64LE(u & MASK_64, this.pos);
    this.buf.writeBigUInt64LE(u >> 64n, this.pos + 8);
    this.pos += 16;
  }

  float64(n: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(n, this.pos);
    this.pos += 8;
  }

  /**
   * A string as its UTF-8 length (LEB128) and bytes; false for one that is not well-formed
   * UTF-16 (a lone surrogate), which UTF-8 cannot hold as it is.
   */
  string(s: string): boolean {
    const n = s.length;
    // ASCII, the common case (ids, names, times), byte by byte: no call into the runtime.
    if (n < 0x80) {
      this.ensure(n + 1);
      const buf = this.buf;
      const at = this.pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[at + i] = c;
      }
      if (i === n) {
        buf[this.pos] = n;
        this.pos = at + n;
        return true;
      }
    }
    if (!s.isWellFormed()) return false;
    const bytes = Buffer.byteLength(s, "utf8");
    this.leb128(bytes);
    this.ensure(bytes);
    this.pos += this.buf.write(s, this.pos, bytes, "utf8");
    return true;
  }
}

// Column types. Each returns false, having maybe written part of the value, for a value it does
// not write exactly: the batch is then abandoned, so what was written does not matter.

/** String / LowCardinality(String): null is '' (ClickHouse's input_format_null_as_default). */
export const writeString: Write = (w, v) => {
  if (typeof v === "string") return w.string(v);
  if (v === null) {
    w.u8(0);
    return true;
  }
  return false;
};

const nullable =
  (write: Write): Write =>
  (w, v) => {
    if (v === null) {
      w.u8(1);
      return true;
    }
    w.u8(0);
    return write(w, v);
  };

/** Nullable(String), and LowCardinality(Nullable(String)), which RowBinary writes alike. */
export const writeNullableString = nullable((w, v) => typeof v === "string" && w.string(v));

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX["0123456789abcdef".charCodeAt(i)] = i;
  HEX["0123456789ABCDEF".charCodeAt(i)] = i;
}
/** Where each of the UUID's 16 bytes starts in its text. */
const UUID_BYTE_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * UUID: two UInt64, little-endian, the first made of the UUID's first 8 bytes and the second of
 * its last 8, so each half's bytes are written in reverse.
 */
export const writeUuid: Write = (w, v) => {
  if (typeof v !== "string" || v.length !== 36) return false;
  if (v[8] !== "-" || v[13] !== "-" || v[18] !== "-" || v[23] !== "-") return false;
  w.ensure(16);
  for (let b = 0; b < 16; b++) {
    const at = UUID_BYTE_AT[b] as number;
    const hi = HEX[v.charCodeAt(at)] ?? -1;
    const lo = HEX[v.charCodeAt(at + 1)] ?? -1;
    if (hi < 0 || lo < 0) return false;
    w.buf[w.pos + (b < 8 ? 7 - b : 23 - b)] = (hi << 4) | lo;
  }
  w.pos += 16;
  return true;
};

/** The ASCII digit at `at`, or NaN. */
function digit(s: string, at: number): number {
  const d = s.charCodeAt(at) - 48;
  return d >= 0 && d <= 9 ? d : Number.NaN;
}

const two = (s: string, at: number) => digit(s, at) * 10 + digit(s, at + 1);

/**
 * `YYYY-MM-DD hh:mm:ss.sss` (the rows' time text, UTC) → ms since the epoch; NaN for any other
 * text, an impossible date or time, or one outside DateTime64's range.
 */
export function timeTextMs(s: string): number {
  if (s.length !== 23) return Number.NaN;
  if (s[4] !== "-" || s[7] !== "-" || s[10] !== " " || s[13] !== ":" || s[16] !== ":")
    return Number.NaN;
  if (s[19] !== ".") return Number.NaN;
  const y = two(s, 0) * 100 + two(s, 2);
  const mo = two(s, 5);
  const d = two(s, 8);
  const h = two(s, 11);
  const mi = two(s, 14);
  const sec = two(s, 17);
  const ms = digit(s, 20) * 100 + two(s, 21);
  // NaN fails every comparison.
  if (!(mo >= 1 && mo <= 12 && d >= 1 && h <= 23 && mi <= 59 && sec <= 59 && ms >= 0))
    return Number.NaN;
  const leap = mo === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  if (d > (DAYS_IN_MONTH[mo - 1] as number) + (leap ? 1 : 0)) return Number.NaN;
  const t = Date.UTC(y, mo - 1, d, h, mi, sec, ms);
  return t >= MIN_TIME_MS && t <= MAX_TIME_MS ? t : Number.NaN;
}

/** DateTime64(3): Int64 ms since the epoch. Null is not written (JSON stores 1970 for it). */
export const writeTime: Write = (w, v) => {
  if (typeof v !== "string") return false;
  const ms = timeTextMs(v);
  if (Number.isNaN(ms)) return false;
  w.int64(ms);
  return true;
};

export const writeNullableTime = nullable(writeTime);

/**
 * Int64 from a JSON number or a string of digits. A number is ClickHouse's parse of its JSON
 * text (String(n)), which past 2^53 is not the double's own value: 2^63 - 1024 is sent, and
 * stored, as 9223372036854775000.
 */
export const writeInt64: Write = (w, v) => {
  if (typeof v === "number") {
    if (Number.isSafeInteger(v)) {
      w.int64(v);
      return true;
    }
    if (!Number.isInteger(v)) return false;
    v = String(v);
  }
  if (typeof v !== "string" || !INTEGER_TEXT.test(v)) return false;
  const n = BigInt(v);
  if (n < INT64_MIN || n > INT64_MAX) return false;
  w.bigInt64(n);
  return true;
};

export const writeNullableInt64 = nullable(writeInt64);

/**
 * Decimal(38, 12): Int128 of the value × 10^12, from its decimal text (a number's JSON text, or
 * a string as the rows carry credits, toFixed(12)). More than 12 decimals, which ClickHouse
 * truncates, or an exponent, are not written.
 */
export const writeDecimal38_12: Write = (w, v) => {
  const text = typeof v === "number" ? (Number.isFinite(v) ? String(v) : "") : v;
  if (typeof text !== "string") return false;
  const m = DECIMAL_TEXT.exec(text);
  if (!m) return false;
  const [, sign, whole, frac = ""] = m as unknown as [string, string, string, string?];
  const digits = whole + frac.padEnd(DECIMAL_SCALE, "0");
  if (digits.length <= 15) {
    // Below 10^15 the value is an exact double: no BigInt for the common amounts.
    const n = Number(digits);
    const signed = sign && n !== 0 ? -n : n;
    w.int64(signed);
    w.ensure(8);
    w.buf.fill(signed < 0 ? 0xff : 0, w.pos, w.pos + 8);
    w.pos += 8;
    return true;
  }
  const n = BigInt(digits);
  w.int128(sign ? -n : n);
  return true;
};

export const writeNullableDecimal38_12 = nullable(writeDecimal38_12);

/** Float64; -0 as 0, as its JSON text "0" is stored. NaN and ±Infinity have no JSON: not written. */
export const writeFloat64: Write = (w, v) => {
  if (typeof v !== "number" || !Number.isFinite(v)) return false;
  w.float64(v === 0 ? 0 : v);
  return true;
};

export const writeNullableFloat64 = nullable(writeFloat64);

/** Array(T): the count (LEB128), then each element. */
export const arrayOf =
  (write: Write): Write =>
  (w, v) => {
    if (!Array.isArray(v)) return false;
    w.leb128(v.length);
    for (const x of v) if (!write(w, x)) return false;
    return true;
  };

/** The type of each column of `reports` a row shape may hold (migrations 1, 7 and 10). */
export const REPORT_COLUMN_WRITERS: Readonly<Record<string, Write>> = {
  report_id: writeUuid,
  project_id: writeString,
  key_id: writeString,
  app: writeString,
  provider: writeString,
  model: writeString,
  timestamp: writeTime,
  received_at: writeTime,
  requests_limit: writeNullableInt64,
  requests_remaining: writeNullableInt64,
  tokens_limit: writeNullableInt64,
  tokens_remaining: writeNullableInt64,
  reset_requests_ms: writeNullableInt64,
  reset_tokens_ms: writeNullableInt64,
  credits_limit: writeNullableDecimal38_12,
  credits_remaining: writeNullableDecimal38_12,
  request_cost: writeNullableDecimal38_12,
  headers: writeNullableString,
  error: writeNullableString,
  account: writeNullableString,
  pool: writeNullableString,
  usage_input_tokens: writeNullableInt64,
  usage_output_tokens: writeNullableInt64,
  usage_cached_tokens: writeNullableInt64,
};

/** The windows columns, in WINDOW_COLUMNS's order. */
const WINDOW_WRITERS: readonly Write[] = [
  arrayOf(writeString),
  arrayOf(writeNullableString),
  arrayOf(writeNullableFloat64),
  arrayOf(writeNullableFloat64),
  arrayOf(writeNullableTime),
  writeString,
];

/** Encodes a batch of rows and their windows; undefined when one value is not written exactly. */
export type EncodeReports = (
  rows: readonly ReportRow[],
  windowsOf: (row: ReportRow) => WindowCells,
) => Buffer | undefined;

/**
 * The RowBinary encoder of rows in `columns` followed by their windows' columns; undefined when a
 * column has no type here (a new report field's column belongs in REPORT_COLUMN_WRITERS: until
 * then its rows go as JSON).
 */
export function reportRowBinary(columns: readonly string[]): EncodeReports | undefined {
  const writers: Write[] = [];
  for (const c of columns) {
    const write = REPORT_COLUMN_WRITERS[c];
    if (!write) return undefined;
    writers.push(write);
  }
  const width = writers.length;
  const w = new RowBinaryWriter();
  const encodeRow = (row: ReportRow, windows: WindowCells): boolean => {
    // A row of another length is refused by ClickHouse as JSON: not guessed at here.
    if (row.length !== width) return false;
    for (let i = 0; i < width; i++) if (!(writers[i] as Write)(w, row[i])) return false;
    // The Nested columns' arrays must be of one length, or ClickHouse refuses the row.
    const n = Array.isArray(windows[0]) ? windows[0].length : -1;
    for (let i = 1; i < 5; i++) {
      const cells = windows[i];
      if (!Array.isArray(cells) || cells.length !== n) return false;
    }
    for (let i = 0; i < WINDOW_WRITERS.length; i++)
      if (!(WINDOW_WRITERS[i] as Write)(w, windows[i])) return false;
    return true;
  };
  return (rows, windowsOf) => {
    w.reset();
    for (const row of rows) if (!encodeRow(row, windowsOf(row))) return undefined;
    return w.bytes();
  };
}
