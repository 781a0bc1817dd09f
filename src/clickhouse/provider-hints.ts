// What a provider hint is, in one place (issue 45): a report with no figure at all — none of the
// contract's `limits` or `credits` (nor a request cost), no window derived from its provider's
// headers or error body, no error body, and (since migration 13) no `usage`. A report whose only figures came from `headers` or
// `error` (Anthropic's headers with null `limits`, Gemini's 429 body) is not a hint.
//
// Migration 10 counts it into the rollups' `figureless_reports` column (and migration 13, with
// usage, into `figureless_reports_2`) (its materialized views
// from then on, its backfill for the reports stored before), and every reader — /usage's
// provider_hints, /spend's requests, the exporter's headroom_provider_hints_total and `headroom
// stats` — sums that column through PROVIDER_HINTS_SUM. The predicate is frozen with the
// migration that uses it (test/unit/migrations.frozen.test.ts): a new definition is a new column
// and a new migration, never an edit here.

/** Migration 10's definition: whether a stored report (a row of `reports`) is a provider hint. */
export const IS_PROVIDER_HINT = `(requests_limit IS NULL AND requests_remaining IS NULL
      AND tokens_limit IS NULL AND tokens_remaining IS NULL
      AND credits_limit IS NULL AND credits_remaining IS NULL AND request_cost IS NULL
      AND empty(\`windows.dimension\`) AND error IS NULL)`;

/** The rollups' column that counts them by migration 10's definition (reports_minute, reports_daily). */
export const PROVIDER_HINTS_COLUMN = "figureless_reports";

/**
 * Migration 13's definition: what the call used (`usage`, issue 45's counted windows) is a
 * figure too, so a DeepSeek call that sends its tokens is no hint. Frozen with migration 13.
 */
export const IS_PROVIDER_HINT_2 = `(${IS_PROVIDER_HINT}
      AND usage_input_tokens IS NULL AND usage_output_tokens IS NULL AND usage_cached_tokens IS NULL)`;

/** The rollups' column that counts them by migration 13's definition: what every reader sums. */
export const PROVIDER_HINTS_COLUMN_2 = "figureless_reports_2";

/** The provider hints of a rollup query's rows. */
export const PROVIDER_HINTS_SUM = `sum(${PROVIDER_HINTS_COLUMN_2})`;

/**
 * The clients' start-up hints among a rollup query's rows: hints with no model (the contract's
 * "one provider hint per detected provider: model null, all six limits null"). Every other report
 * is a call, one request, figures or not (Bedrock's and DeepSeek's calls state none): what
 * /spend's `requests` counts, as the counted windows count them (issue 45).
 */
export const STARTUP_HINTS_SUM = `sumIf(${PROVIDER_HINTS_COLUMN_2}, model = '')`;
