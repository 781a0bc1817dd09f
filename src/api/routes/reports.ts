import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
import { creditsSchema, eachKey, limitsSchema } from "../../report/report-schema.js";
import { cursorParam } from "../cursor.js";
import { limit, parseQuery, seriesFilters, time } from "../params.js";
import { type ReportsDeps, readReports } from "../queries/reports.js";

// GET /api/v1/reports: the project's reports, newest first (timestamp, then id as text: a
// UUID's own order in ClickHouse is not its text's), a page at a time (the query:
// queries/reports.ts).

export const reportsQuery = z.strictObject({
  from: time.optional(),
  to: time.optional(),
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

export const reportsRoutes: FastifyPluginAsync<ReportsDeps> = async (app, deps) => {
  app.get("/api/v1/reports", async (req) => {
    const q = parseQuery(reportsQuery, req.query);
    return readReports(deps, req.project as KeyLookup, q);
  });
};
