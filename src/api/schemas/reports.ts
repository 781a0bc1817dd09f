import { z } from "zod";
import { WINDOW_SOURCES } from "../../providers/window.js";
import { creditsSchema, eachKey, limitsSchema } from "../../report/report-schema.js";
import { cursorParam } from "../cursor.js";
import { limit, rangeParams, seriesFilters } from "../params.js";

// GET /api/v1/reports: what it is asked and what it answers (the route: routes/reports.ts, the
// query: queries/reports.ts, the OpenAPI document: openapi.ts).

export const reportsQuery = z.strictObject({
  ...rangeParams,
  limit: limit(100, 50),
  cursor: cursorParam.optional(),
  ...seriesFilters,
});

const nullableNumber = z.number().nullable();
export const reportItem = z.object({
  id: z.uuid(),
  app: z.string(),
  provider: z.string(),
  model: z.string().nullable(),
  timestamp: z.string(),
  received_at: z.string(),
  // The report schema's own fields, as stored.
  limits: z.object(eachKey(limitsSchema.shape, nullableNumber)),
  credits: z.object(eachKey(creditsSchema.shape, nullableNumber)).nullable(),
  // The windows derived from what the provider said (headers, error body) or from the fields
  // above, and the provider's error in a line: what an Anthropic or Gemini report carries.
  windows: z.array(
    z.object({
      dimension: z.string(),
      window: z.string().nullable(),
      /** Where the figures come from: stated by the provider, or learned from its limit error. */
      source: z.enum(WINDOW_SOURCES),
      limit: nullableNumber,
      remaining: nullableNumber,
      used_pct: nullableNumber,
      resets_at: z.string().nullable(),
    }),
  ),
  error: z
    .object({
      summary: z.string(),
      status: z.number().nullable(),
      rate_limited: z.boolean(),
      kind: z.string().nullable(),
    })
    .nullable(),
});

export const reportsResponse = z.object({
  items: z.array(reportItem),
  next_cursor: z.string().nullable(),
});
