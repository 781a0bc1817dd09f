import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  isoOf,
  parseIsoTimestamp,
  parseIsoTimestampFully,
} from "../../src/report/report-schema.js";
import { looseDateTimes } from "../helpers/report-arbitraries.js";

// The canonical timestamp path (`YYYY-MM-DDTHH:MM:SS.sssZ` read without the regex) against the
// full parser, which stays the reference: for any text, both give the same ms or both null; and
// the ISO text of a parsed ms is toISOString's.

/** Every ms toISOString writes with a four-digit year (0000 to 9999). */
const anyMs = fc.integer({ min: -62_167_219_200_000, max: 253_402_300_799_999 });

/** A canonical text with each field drawn from a range a little wider than the valid one. */
const canonicalLayout = looseDateTimes("T", "Z");

/** A canonical text with one character replaced by any other. */
const mutated = fc
  .tuple(
    anyMs,
    fc.integer({ min: 0, max: 23 }),
    fc.oneof(
      fc.constantFrom(..."0123456789-T:.Zz+ /tx"),
      fc.string({ minLength: 1, maxLength: 1 }),
    ),
  )
  .map(([ms, at, c]) => {
    const t = new Date(ms).toISOString();
    return t.slice(0, at) + c + t.slice(at + 1);
  });

describe("parseIsoTimestamp", () => {
  it("reads toISOString's text back to its ms, and isoOf gives the text back", () => {
    fc.assert(
      fc.property(anyMs, (ms) => {
        const text = new Date(ms).toISOString();
        const expected = parseIsoTimestampFully(text);
        expect(parseIsoTimestamp(text)).toBe(expected);
        if (expected !== null) expect(isoOf(expected)).toBe(new Date(expected).toISOString());
      }),
      { numRuns: 2_000 },
    );
  });

  it("equals the full parser on canonical layouts of any field values", () => {
    fc.assert(
      fc.property(canonicalLayout, (text) => {
        expect(parseIsoTimestamp(text)).toBe(parseIsoTimestampFully(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it("equals the full parser on canonical texts with one character changed", () => {
    fc.assert(
      fc.property(mutated, (text) => {
        expect(parseIsoTimestamp(text)).toBe(parseIsoTimestampFully(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it("equals the full parser on the edges of the calendar", () => {
    for (const text of [
      "2024-02-29T23:59:59.999Z",
      "2023-02-29T00:00:00.000Z",
      "2100-02-29T00:00:00.000Z",
      "2000-02-29T00:00:00.000Z",
      "2024-12-31T23:59:59.999Z",
      "0099-01-01T00:00:00.000Z",
      "0100-01-01T00:00:00.000Z",
      "2024-05-01T10:00:00.123z",
      "2024-05-01t10:00:00.123Z",
      "2024-05-01T10:00:00,123Z",
      "+02024-05-01T10:00:00.12Z",
    ]) {
      expect(parseIsoTimestamp(text), text).toBe(parseIsoTimestampFully(text));
    }
    expect(parseIsoTimestamp("2024-02-29T23:59:59.999Z")).toBe(
      Date.UTC(2024, 1, 29, 23, 59, 59, 999),
    );
    expect(parseIsoTimestamp("2023-02-29T00:00:00.000Z")).toBeNull();
  });

  it("gives any ms's ISO text, whatever was parsed last", () => {
    fc.assert(
      fc.property(anyMs, anyMs, (parsed, asked) => {
        parseIsoTimestamp(new Date(parsed).toISOString());
        expect(isoOf(asked)).toBe(new Date(asked).toISOString());
      }),
    );
  });
});
