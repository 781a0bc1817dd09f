import { z } from "zod";
import { BURN_UNITS, UNKNOWN_REASONS } from "../../alerts/now-model.js";
import { STATUSES } from "../../headroom/headroom-view.js";
import { WINDOW_LENGTHS } from "../../providers/window.js";
import { seriesFilters } from "../params.js";

// GET /api/v1/headroom: what it is asked and what it answers (the route: routes/headroom.ts,
// the reading: queries/headroom.ts, the OpenAPI document: openapi.ts).

export const headroomQuery = z.strictObject(seriesFilters);

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
});

/** One of a series' windows: which one, when it was last reported, and the metric view's fields. */
export const windowView = metricView.extend({
  dimension: z.string(),
  window: z.enum(WINDOW_LENGTHS).nullable(),
  reported_at: z.string(),
});

export const headroomResponse = z.object({
  at: z.string(),
  series: z.array(
    z.object({
      provider: z.string(),
      model: z.string().nullable(),
      app: z.string(),
      status: z.enum(STATUSES),
      last_seen: z.string(),
      reported_at: z.string().nullable(),
      credits_reported_at: z.string().nullable(),
      requests: metricView,
      tokens: metricView,
      credits: metricView,
      windows: z.array(windowView),
    }),
  ),
});

export type HeadroomResponse = z.infer<typeof headroomResponse>;
