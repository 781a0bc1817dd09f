// /api/v1/headroom as the page reads it: the fields the page uses. Checked against the API's zod
// schema (src/api/schemas/headroom.ts) by test/unit/headroom-types.test.ts, type-checked with the
// server's code: the answer the API gives must be assignable to these. Nothing here may use the
// DOM, so that the server's compilation can read this file.

/**
 * What /api/v1/headroom says today, plus "reset" (a window past its reset time) and any status
 * a newer API adds: the page shows an unknown one by its name, between warning and ok.
 */
export type Status = "ok" | "warning" | "critical" | "reset" | "stale" | (string & {});

/** Why a figure of the model of now is null (src/alerts/now-model.ts' UNKNOWN_REASONS). */
export type UnknownReason =
  | "no_figures"
  | "no_reset_time"
  | "too_few_reports"
  | "not_burning"
  | "resets_first"
  | "reset_since_report"
  | (string & {});

export interface MetricView {
  limit: number | null;
  remaining: number | null;
  used_pct: number | null;
  resets_at: string | null;
  /** The window has reset since its last report: its figures are the previous window's. */
  reset_since_report: boolean;
  burn_per_s: number | null;
  burn_unknown: UnknownReason | null;
  exhaustion_eta_s: number | null;
  exhaustion_unknown: UnknownReason | null;
}

/** One of a series' windows: a dimension over a length the provider states (null: it did not). */
export interface WindowView extends MetricView {
  dimension: string;
  window: string | null;
  /** Where the figures come from: stated, learned, declared or counted (docs/providers.md). */
  source: "stated" | "learned" | "declared" | "counted" | (string & {});
  /** Where its limit was learned (a 429's report and time), or null. */
  learned_from: { report_id: string; at: string } | null;
  /** How a counted window resets: utc_minute, utc_day, pacific_day, rolling, …; null otherwise. */
  resets?: string | null;
  reported_at: string;
}

/** A series' or a pool's figures: what a card's part and a table's row draw. */
export interface Figures {
  provider: string;
  model: string | null;
  status: Status;
  last_seen: string;
  reported_at: string | null;
  credits_reported_at: string | null;
  requests: MetricView;
  tokens: MetricView;
  credits: MetricView;
  windows: WindowView[];
}

export interface SeriesView extends Figures {
  app: string;
}

/** One pool (docs/pools.md): the series that draw on one provider limit, with one figure. */
export interface PoolView extends Figures {
  pool: string;
  kind: "account" | "label" | "app" | (string & {});
  label: string | null;
  members: { app: string; key_id: string | null; last_seen: string }[];
}

export interface Headroom {
  at: string;
  /** Per app; absent when asked with group=pool. */
  series?: SeriesView[];
  /** Per pool; absent when asked with group=app. */
  pools?: PoolView[];
}
