// What a counted window counts (issue 45, src/alerts/counted-windows.ts), in SQL over a stored
// report: one request per call whose provider states no remaining, and the tokens of its `usage`
// — not a rate-limited call (it was refused), nor a provider hint with no model. The hot copy
// decides it per row in TypeScript (countedCallOf, with error-summary.ts's reading of the error
// body); here a rate limit is the same words and statuses matched in the body's text, so an error
// body that mentions a quota only in its details is not counted either. Migration 14 counts it
// into reports_minute, and /usage's counted windows read it. Frozen with that migration
// (test/unit/migrations.frozen.test.ts): a new definition is a new column and a new migration.

const HAS_FIGURES = `(requests_limit IS NOT NULL OR requests_remaining IS NOT NULL
      OR tokens_limit IS NOT NULL OR tokens_remaining IS NOT NULL
      OR credits_limit IS NOT NULL OR credits_remaining IS NOT NULL OR request_cost IS NOT NULL)`;

/** error-summary.ts's RATE_LIMITED words, and a 429 in a status field. */
const RATE_LIMITED = `(error IS NOT NULL AND (
      match(assumeNotNull(error), '(?i)rate.?limit|resource.?exhausted|throttl|too.?many.?requests|quota')
      OR match(assumeNotNull(error), '"(code|status|statusCode|httpStatusCode)"[[:space:]]*:[[:space:]]*"?429([^0-9]|$)')))`;

/** Whether a stored report (a row of `reports`) is counted against a learned or declared limit. */
export const IS_COUNTED = `(NOT arrayExists(r -> r IS NOT NULL, \`windows.remaining\`)
      AND NOT ${RATE_LIMITED}
      AND NOT (model = '' AND NOT ${HAS_FIGURES}))`;

/** A usage figure as the hot copy counts it: a negative or absent one is none. */
const tokens = (column: string) => `greatest(ifNull(${column}, 0), 0)`;

/** reports_minute's columns of counted reports and their tokens, as its view sums them. */
export const COUNTED_COLUMNS = [
  { name: "counted_reports", type: "UInt64", sum: `countIf(${IS_COUNTED})` },
  {
    name: "counted_input_tokens",
    type: "Int64",
    sum: `sumIf(${tokens("usage_input_tokens")}, ${IS_COUNTED})`,
  },
  {
    name: "counted_output_tokens",
    type: "Int64",
    sum: `sumIf(${tokens("usage_output_tokens")}, ${IS_COUNTED})`,
  },
] as const;
