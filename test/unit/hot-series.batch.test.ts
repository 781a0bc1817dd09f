import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { timestampMsOf, timestampReader } from "../../src/alerts/usage.js";
import { hotUpdates, LIMIT_COLUMNS } from "../../src/headroom/hot-series.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";
import { hotUpdatesReference } from "../helpers/hot-updates-reference.js";
import { looseDateTimes } from "../helpers/report-arbitraries.js";

// hotUpdates reads a batch in one pass, turning figures into text only for what it sends: it
// must give exactly what the plain row-by-row version gives, for any rows.

const at = (c: string) => REPORT_COLUMNS.indexOf(c as (typeof REPORT_COLUMNS)[number]);

/** DateTime64(3) text, mostly valid and sharing minutes; some out of range or malformed. */
const timestamps = fc
  .oneof(
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 180_000 }) },
    // Reports of the same millisecond: ties that only the value's text orders.
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 8 }) },
    { weight: 1, arbitrary: fc.constant(-1) },
  )
  .chain((offset) =>
    offset >= 0
      ? fc.constant(
          new Date(Date.UTC(2030, 0, 1, 23, 59) + offset * 7)
            .toISOString()
            .replace("T", " ")
            .slice(0, 23),
        )
      : fc.oneof(
          looseDateTimes(" ", ""),
          fc.constantFrom(
            "2030-01-01 24:00:00.000",
            "2030-01-01 24:00:00.001",
            "2030-01-01T10:00:00.000",
            "2030-01-01 10:00:00.00",
            "2030-01-01 10:00:0a.000",
            "2030-02-30 10:00:00.000",
            "",
          ),
          fc.string({ maxLength: 25 }),
        ),
  );

const figure = fc.oneof(
  fc.constant(null),
  fc.integer({ min: 0, max: 20 }),
  fc.constantFrom(9_007_199_254_740_993n.toString(), "", "7"),
);
const credit = fc.oneof(fc.constant(null), fc.constantFrom("1.500000000000", "0.000000000000"));

const row = fc
  .record({
    id: fc.constantFrom("a", "b", "c", "0190-x"),
    project: fc.constantFrom("p1", "p2"),
    app: fc.constantFrom("app", "x\u0000y", '"'),
    provider: fc.constantFrom("openai", "anthropic"),
    model: fc.constantFrom(null, "m", ""),
    timestamp: timestamps,
    figures: fc.array(figure, { minLength: 6, maxLength: 6 }),
    credits: fc.array(credit, { minLength: 3, maxLength: 3 }),
  })
  .map((r): ReportRow => {
    const out: ReportRow = REPORT_COLUMNS.map(() => null);
    out[at("report_id")] = r.id;
    out[at("project_id")] = r.project;
    out[at("key_id")] = "k";
    out[at("app")] = r.app;
    out[at("provider")] = r.provider;
    out[at("model")] = r.model;
    out[at("timestamp")] = r.timestamp;
    out[at("received_at")] = r.timestamp;
    LIMIT_COLUMNS.forEach((c, i) => {
      out[at(c)] = r.figures[i] ?? null;
    });
    ["credits_limit", "credits_remaining", "request_cost"].forEach((c, i) => {
      out[at(c)] = r.credits[i] ?? null;
    });
    return out;
  });

describe("timestampReader", () => {
  it("reads every timestamp as timestampMsOf does", () => {
    fc.assert(
      fc.property(fc.array(timestamps, { maxLength: 50 }), (texts) => {
        const read = timestampReader();
        for (const text of texts) {
          const r: ReportRow = REPORT_COLUMNS.map(() => null);
          r[at("timestamp")] = text;
          expect(read(r)).toEqual(timestampMsOf(r));
        }
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("hotUpdates", () => {
  it("gives what the row-by-row reference gives", () => {
    fc.assert(
      fc.property(fc.array(row, { maxLength: 120 }), (rows) => {
        expect(hotUpdates(rows)).toEqual(hotUpdatesReference(rows));
      }),
      { numRuns: 1_000 },
    );
  });
});
