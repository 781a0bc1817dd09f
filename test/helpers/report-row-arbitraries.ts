import fc from "fast-check";
import type { DerivedWindows, Window } from "../../src/providers/window.js";
import type { ReportRow } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";

// Rows as the worker holds them (src/report/row-shapes.ts's current shape, values as the edge
// writes them or as JSON can carry them), every kind of value each column takes, with the
// corners of each type: for the RowBinary encoder's tests (row-binary.test.ts, report-sink).

const MIN_MS = Date.UTC(1900, 0, 1);
const MAX_MS = Date.UTC(2300, 0, 1) - 1;
const RECEIVED_FROM = Date.UTC(2026, 0, 1);

/** The rows' time text, `YYYY-MM-DD hh:mm:ss.sss` (UTC), of a time in DateTime64(3)'s range. */
export const timeText = (ms: number) => {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
};

const times = fc
  .oneof(
    fc.integer({ min: MIN_MS, max: MAX_MS }),
    fc.constantFrom(MIN_MS, MAX_MS, -1, 0, Date.UTC(2024, 1, 29, 12, 0, 0, 123)),
  )
  .map(timeText);

const text = fc
  .oneof(
    fc.string({ unit: "grapheme", maxLength: 30 }),
    fc.string({ unit: "binary", maxLength: 30 }),
    fc.string({ unit: "grapheme-ascii", minLength: 120, maxLength: 300 }),
    fc.string({ unit: "grapheme", minLength: 50, maxLength: 200 }),
    fc.constantFrom("", "\u0000", "a\u0000b", "é😀", "日本語", "\u2028\u2029", '"\\', "\n"),
  )
  .filter((s) => s.isWellFormed());

const INT64_MAX = 2n ** 63n - 1n;
const int64s = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000 }),
  fc.maxSafeInteger(),
  // Past 2^53: doubles whose JSON text fits Int64, and digit strings.
  fc.double({ min: -(2 ** 62), max: 2 ** 62, noNaN: true }).map((n) => Math.round(n)),
  fc.constantFrom(2 ** 63 - 1024, -(2 ** 63) + 1024, 2 ** 53 + 2, -0),
  fc.bigInt({ min: -INT64_MAX - 1n, max: INT64_MAX }).map(String),
  fc.constantFrom("9223372036854775807", "-9223372036854775808", "0", "-0", "007"),
);

const decimals = fc.oneof(
  // As the edge writes credits: toFixed(12) of a number below 1e21.
  fc.double({ min: -9.99e20, max: 9.99e20, noNaN: true }).map((n) => n.toFixed(12)),
  fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((n) => n.toFixed(12)),
  // Any text Decimal(38, 12) holds: up to 26 digits and 12 decimals.
  fc
    .tuple(
      fc.boolean(),
      fc.stringMatching(/^\d{1,26}$/),
      fc.option(fc.stringMatching(/^\d{1,12}$/), { nil: undefined }),
    )
    .map(
      ([neg, whole, frac]) => `${neg ? "-" : ""}${whole}${frac === undefined ? "" : `.${frac}`}`,
    ),
  // Numbers, as JSON carries them, whose text has no exponent.
  fc.integer({ min: -1e9, max: 1e9 }),
  fc.constantFrom(0.1, 0.5, -2.25, 1e20, 123.456),
  fc.constantFrom("-0.000000000000", "0.000000000001", "99999999999999999999999999.999999999999"),
);

const column = (name: string): fc.Arbitrary<unknown> => {
  switch (name) {
    case "report_id":
      return fc.oneof(
        fc.uuid(),
        fc.uuid().map((u) => u.toUpperCase()),
      );
    case "project_id":
    case "key_id":
    case "provider":
      return text;
    case "app":
    case "model":
      // Null in a String column is stored as '' (input_format_null_as_default).
      return fc.option(text, { freq: 4 });
    case "timestamp":
      return times;
    case "received_at":
      // The edge's clock: a partition per month, and within any retention.
      return fc.integer({ min: 0, max: 86_400_000 }).map((ms) => timeText(RECEIVED_FROM + ms));
    case "headers":
    case "error":
    case "account":
    case "pool":
      return fc.option(text, { freq: 2 });
    default:
      if (name.startsWith("credits") || name === "request_cost")
        return fc.option(decimals, { freq: 3 });
      return fc.option(int64s, { freq: 3 });
  }
};

/** One row in the current shape. */
export const reportRows: fc.Arbitrary<ReportRow> = fc.tuple(
  ...ROW_SHAPES.columns.map(column),
) as unknown as fc.Arbitrary<ReportRow>;

const floats = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 0.1, 1e300, 5e-324, 2 ** 53 + 2, 1.7976931348623157e308),
);

/** A report's windows, as a parser derives them. */
export const derivedWindows: fc.Arbitrary<DerivedWindows> = fc.record({
  windows: fc.array(
    fc.record({
      dimension: text,
      window: fc.option(fc.constantFrom("1m", "1h", "1d", "7d")),
      limit: fc.option(floats, { freq: 3 }),
      remaining: fc.option(floats, { freq: 3 }),
      resets_at: fc.option(fc.integer({ min: MIN_MS, max: MAX_MS }), { freq: 3 }),
    }) as fc.Arbitrary<Window>,
    { maxLength: 4 },
  ),
  warnings: fc.constant([]),
  parser: fc.oneof(fc.constantFrom("limits@1", "anthropic@1", "failed"), text),
});
