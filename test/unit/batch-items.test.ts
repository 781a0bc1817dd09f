import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ItemResult, resultsJson } from "../../src/edge/batch-items.js";

// The batch answer's body is written from a template for items answered with their id alone:
// byte for byte what JSON.stringify writes, whatever the mix of items.

const issue = fc.record({ path: fc.string(), message: fc.string() });
const result: fc.Arbitrary<ItemResult> = fc.oneof(
  fc.uuid().map((id) => ({ id })),
  fc.record({ id: fc.uuid(), warnings: fc.array(issue, { minLength: 1, maxLength: 3 }) }),
  fc.uuid().map((id) => ({ id, duplicate: true as const })),
  fc.record({
    error: fc.constantFrom("invalid_report", "rate_limited", "unavailable"),
    message: fc.string(),
    issues: fc.array(issue, { maxLength: 3 }),
  }),
);

describe("the batch answer's body", () => {
  it("is JSON.stringify's text of { results }", () => {
    fc.assert(
      fc.property(fc.array(result, { maxLength: 20 }), (results) => {
        expect(resultsJson(results)).toBe(JSON.stringify({ results }));
      }),
    );
  });

  it("writes an id alone from the template", () => {
    const id = "01900000-0000-7000-8000-000000000001";
    expect(resultsJson([{ id }, { id, duplicate: true }])).toBe(
      `{"results":[{"id":"${id}"},{"id":"${id}","duplicate":true}]}`,
    );
    expect(resultsJson([])).toBe('{"results":[]}');
  });
});
