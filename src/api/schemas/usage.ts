import { z } from "zod";
import { POOL_KINDS } from "../../headroom/pool-view.js";
import { groupByOf, rangeParams, seriesFilters, single } from "../params.js";
import { WINDOWS } from "../time-range.js";

// GET /api/v1/usage: what it is asked and what it answers (the route: routes/usage.ts, the SQL
// and the answers' caches: queries/usage.ts, the OpenAPI document: openapi.ts).

export const FORMATS = ["json", "csv"] as const;

/**
 * What /usage groups by: a series' fields, or `pool` (docs/pools.md), whose points name the pool
 * with its provider and model (and, with `app` too, each member apart).
 */
export const USAGE_GROUPS = ["provider", "model", "pool", "app"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

export const usageQuery = z.strictObject({
  ...rangeParams,
  window: single(z.enum(WINDOWS, { error: "expected minute, hour or day" })).optional(),
  group_by: groupByOf(USAGE_GROUPS),
  format: single(z.enum(FORMATS, { error: "expected json or csv" })).optional(),
  ...seriesFilters,
});

export const usagePoint = z.object({
  bucket: z.string(),
  provider: z.string().optional(),
  model: z.string().nullable().optional(),
  /** With group_by=pool: the pool's id (as /headroom's), kind, label and the apps that reported into it in the bucket. */
  pool: z.string().optional(),
  kind: z.enum(POOL_KINDS).optional(),
  label: z.string().nullable().optional(),
  members: z.array(z.string()).optional(),
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
  used_pct_by_dimension: z
    .record(z.string(), z.number())
    .describe(
      "The worst % used of each dimension (requests, tokens, input_tokens, …) in this bucket, across the windows of the group's series (or pools); a dimension without a limit and a remaining is absent. A window with a declared or learned limit counts too, with the limit that applies now: a stated remaining without a stated limit takes it, and a window no report states a remaining of is counted (one request per report, the tokens of its usage; its worst moment in the bucket). A counted % is a floor of what was used: calls that no app reported are not seen.",
    ),
});

export const usageResponse = z.object({
  from: z.string(),
  to: z.string(),
  window: z.enum(WINDOWS),
  group_by: z.array(z.string()),
  points: z.array(usagePoint),
});
