import { z } from "zod";
import { BURN_UNITS, UNKNOWN_REASONS } from "../../alerts/now-model.js";
import { RESET_KINDS } from "../../alerts/counted-windows.js";
import { STATUSES } from "../../headroom/headroom-view.js";
import { POOL_KINDS } from "../../headroom/pool-view.js";
import { WINDOW_LENGTHS, WINDOW_SOURCES } from "../../providers/window.js";
import { seriesFilters, single } from "../params.js";

// GET /api/v1/headroom: what it is asked and what it answers (the route: routes/headroom.ts,
// the reading: queries/headroom.ts, the OpenAPI document: openapi.ts).

export const headroomQuery = z.strictObject({
  ...seriesFilters,
  /** `pool`: per pool only; `app`: per app only (series); neither: both. */
  group: single(z.enum(["pool", "app"])).optional(),
});

const unknown = z.enum(UNKNOWN_REASONS).nullable();
const metricView = z.object({
  limit: z.number().nullable(),
  remaining: z.number().nullable(),
  used_pct: z.number().nullable(),
  resets_at: z.string().nullable(),
  resets_in_s: z.number().nullable(),
  resets_unknown: unknown,
  reset_since_report: z.boolean(),
  burn_per_s: z.number().nullable(),
  burn: z.number().nullable(),
  burn_unit: z.enum(Object.values(BURN_UNITS)),
  burn_unknown: unknown,
  exhausted_at: z.string().nullable(),
  exhaustion_eta_s: z.number().nullable(),
  exhaustion_unknown: unknown,
  /**
   * Present when a series' requests or tokens come from one of its windows: the contract's
   * fields said nothing of them, and this is its most used window of the metric
   * (docs/read-api.md). Where its figures come from, as a window says it.
   */
  source: z.enum(WINDOW_SOURCES).optional(),
  /** The window's dimension (tokens: `tokens`, `input_tokens` or `output_tokens`), when `source` is. */
  dimension: z.string().optional(),
  /** The window's length (null: the provider did not say), when `source` is. */
  window: z.enum(WINDOW_LENGTHS).nullable().optional(),
});

/** One of a series' windows: which one, when it was last reported, and the metric view's fields. */
export const windowView = metricView.extend({
  dimension: z.string(),
  window: z.enum(WINDOW_LENGTHS).nullable(),
  /** Where the figures come from (docs/providers.md): a counted remaining is a floor of what was used. */
  source: z.enum(WINDOW_SOURCES),
  /** Where its limit was learned: the limit error's report and its time; null when not learned. */
  learned_from: z.object({ report_id: z.string(), at: z.string() }).nullable(),
  /** How a counted window resets (docs/providers.md); null for the others. */
  resets: z.enum(RESET_KINDS).nullable(),
  reported_at: z.string(),
});

const seriesFigures = z.object({
  provider: z.string(),
  model: z.string().nullable(),
  status: z.enum(STATUSES),
  last_seen: z.string(),
  reported_at: z.string().nullable(),
  credits_reported_at: z.string().nullable(),
  requests: metricView,
  tokens: metricView,
  credits: metricView,
  windows: z.array(windowView),
});

/** One pool (docs/pools.md): the newest figures of any member per window, all members' burn. */
export const poolAnswer = seriesFigures.extend({
  pool: z.string(),
  kind: z.enum(POOL_KINDS),
  label: z.string().nullable(),
  members: z.array(
    z.object({ app: z.string(), key_id: z.string().nullable(), last_seen: z.string() }),
  ),
});

export const headroomResponse = z.object({
  at: z.string(),
  /** Per app (absent with group=pool). */
  series: z.array(seriesFigures.extend({ app: z.string() })).optional(),
  /** Per pool (absent with group=app). */
  pools: z.array(poolAnswer).optional(),
});

export type HeadroomResponse = z.infer<typeof headroomResponse>;
