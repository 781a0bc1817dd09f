import { z } from "zod";
import { ruleMetricSchema } from "../../alerts/rule.js";
import { WINDOW_LENGTHS } from "../../providers/window.js";
import { cursorParam } from "../cursor.js";
import { limit, rangeParams, seriesFilters } from "../params.js";

// GET /api/v1/alerts/events: what it is asked and what it answers (the route: routes/alert-events.ts,
// the query: queries/alert-events.ts, the OpenAPI document: openapi.ts).

export const LEVELS = ["warning", "critical", "resolved"] as const;

export const alertEventsQuery = z.strictObject({
  ...rangeParams,
  limit: limit(100, 50),
  cursor: cursorParam.optional(),
  level: z
    .union([z.string(), z.array(z.string())])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .pipe(z.array(z.enum(LEVELS, { error: "expected warning, critical or resolved" })).max(3))
    .optional(),
  provider: seriesFilters.provider,
});

export const alertEventItem = z.object({
  id: z.string(),
  rule_id: z.string(),
  provider: z.string(),
  model: z.string().nullable(),
  app: z.string(),
  metric: ruleMetricSchema.meta({
    description:
      "The rule's metric: the dimension it watches (requests, tokens, credits, input_tokens, output_tokens, or another a provider names).",
  }),
  dimension: z.string().meta({
    description:
      "The dimension of the window that moved (the rule's metric); an event stored before windows had dimensions gives its metric.",
  }),
  window: z.enum(WINDOW_LENGTHS).nullable().meta({
    description:
      "The length of the window that moved, or null when the provider did not state it (and for events stored before windows).",
  }),
  level: z.enum(LEVELS),
  used_pct: z.number(),
  limit: z.number(),
  remaining: z.number(),
  reset_ms: z.number().nullable(),
  burn_per_s: z.number().nullable(),
  exhaustion_eta_s: z.number().nullable(),
  warn_pct: z.number(),
  critical_pct: z.number(),
  report_id: z.uuid(),
  at: z.string(),
});

export const alertEventsResponse = z.object({
  items: z.array(alertEventItem),
  next_cursor: z.string().nullable(),
});
