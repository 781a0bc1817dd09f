import { z } from "zod";
import { groupBy, seriesFilters, single, time } from "../params.js";
import { WINDOWS } from "../time-range.js";

// GET /api/v1/usage: what it is asked and what it answers (the route: routes/usage.ts, the SQL
// and the answers' caches: queries/usage.ts, the OpenAPI document: openapi.ts).

export const FORMATS = ["json", "csv"] as const;

export const usageQuery = z.strictObject({
  from: time.optional(),
  to: time.optional(),
  window: single(z.enum(WINDOWS, { error: "expected minute, hour or day" })).optional(),
  group_by: groupBy,
  format: single(z.enum(FORMATS, { error: "expected json or csv" })).optional(),
  ...seriesFilters,
});

export const usagePoint = z.object({
  bucket: z.string(),
  provider: z.string().optional(),
  model: z.string().nullable().optional(),
  app: z.string().optional(),
  reports: z.number(),
  provider_hints: z.number(),
  requests_remaining_min: z.number().nullable(),
  tokens_remaining_min: z.number().nullable(),
  requests_limit_max: z.number().nullable(),
  tokens_limit_max: z.number().nullable(),
  used_pct_max: z.number().nullable(),
  cost: z.number(),
  credits_remaining_last: z.number().nullable(),
  /**
   * The worst % used of each dimension (requests, tokens, input_tokens, …) in this bucket, across
   * the windows of the group's series; a dimension without a limit and a remaining is absent.
   */
  used_pct_by_dimension: z.record(z.string(), z.number()),
});

export const usageResponse = z.object({
  from: z.string(),
  to: z.string(),
  window: z.enum(WINDOWS),
  group_by: z.array(z.string()),
  points: z.array(usagePoint),
});
