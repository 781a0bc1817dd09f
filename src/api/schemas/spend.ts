import { z } from "zod";
import { UNKNOWN_REASONS } from "../../alerts/now-model.js";
import { rangeParams, seriesFilters } from "../params.js";

// GET /api/v1/spend: what it is asked and what it answers (the route: routes/spend.ts, the
// query: queries/spend.ts, the OpenAPI document: openapi.ts).

export const spendQuery = z.strictObject({
  ...rangeParams,
  ...seriesFilters,
});

export const spendItem = z.object({
  provider: z.string(),
  cost: z.number(),
  requests: z.number(),
  /** Cost over the range ÷ its hours. */
  burn_per_hour: z.number(),
  credits_remaining: z.number().nullable(),
  /** As /headroom's credits, at this answer: burn in credits/h, and when they run out. */
  credits_burn_per_hour: z.number().nullable(),
  credits_burn_unknown: z.enum(UNKNOWN_REASONS).nullable(),
  depleted_at: z.string().nullable(),
  hours_until_depleted: z.number().nullable(),
  hours_until_depleted_unknown: z.enum(UNKNOWN_REASONS).nullable(),
});

export const spendResponse = z.object({
  from: z.string(),
  to: z.string(),
  providers: z.array(spendItem),
});
