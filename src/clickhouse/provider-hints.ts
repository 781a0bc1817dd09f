// What a provider hint is, in one place (issue 45): a report with no figure at all — none of the
// contract's `limits` or `credits` (nor a request cost), no window derived from its provider's
// headers or error body, and no error body. A report whose only figures came from `headers` or
// `error` (Anthropic's headers with null `limits`, Gemini's 429 body) is not a hint.
//
// Migration 10 counts it into the rollups' `figureless_reports` column (its materialized views
// from then on, its backfill for the reports stored before), and every reader — /usage's
// provider_hints, /spend's requests, the exporter's headroom_provider_hints_total and `headroom
// stats` — sums that column through PROVIDER_HINTS_SUM. The predicate is frozen with the
// migration that uses it (test/unit/migrations.frozen.test.ts): a new definition is a new column
// and a new migration, never an edit here.

/** Whether a stored report (a row of `reports`) is a provider hint, in ClickHouse SQL. */
export const IS_PROVIDER_HINT = `(requests_limit IS NULL AND requests_remaining IS NULL
      AND tokens_limit IS NULL AND tokens_remaining IS NULL
      AND credits_limit IS NULL AND credits_remaining IS NULL AND request_cost IS NULL
      AND empty(\`windows.dimension\`) AND error IS NULL)`;

/** The rollups' column that counts them (reports_minute, reports_daily). */
export const PROVIDER_HINTS_COLUMN = "figureless_reports";

/** The provider hints of a rollup query's rows. */
export const PROVIDER_HINTS_SUM = `sum(${PROVIDER_HINTS_COLUMN})`;
