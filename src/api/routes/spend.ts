import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
import { filterSql, parseQuery, seriesFilters, time } from "../params.js";
import { num, type ReadStore } from "../read-store.js";
import { alignRange, chDate, chSeconds, MAX_RANGE_MS, resolveRange, widen } from "../time-range.js";

// GET /api/v1/spend: per provider over a range (default: the last 24 hours), the cost and
// the requests from the rollups (reports, less provider hints: a client's start-up hint is no
// request to the provider), the burn per hour over the range, the last credit balance, and
// the hours until it is depleted at that burn. Ranges up to 7 days read the minute rollups
// (whole minutes); longer ones the daily rollups (whole days, UTC).

export const spendQuery = z.strictObject({
  from: time.optional(),
  to: time.optional(),
  ...seriesFilters,
});

export const spendItem = z.object({
  provider: z.string(),
  cost: z.number(),
  requests: z.number(),
  burn_per_hour: z.number(),
  credits_remaining: z.number().nullable(),
  hours_until_depleted: z.number().nullable(),
});

export const spendResponse = z.object({
  from: z.string(),
  to: z.string(),
  providers: z.array(spendItem),
});

export interface SpendDeps {
  store: ReadStore;
  now?: () => number;
}

interface SpendRow {
  provider: string;
  cost: number;
  requests: string;
  credits_last: number | null;
}

function spendSql(db: string, daily: boolean, filters: string) {
  const type = daily ? "Date" : "DateTime";
  return `SELECT provider, toFloat64(sum(cost_sum)) AS cost, sum(reports) - sum(provider_hints) AS requests,
    toFloat64(argMaxIfMerge(credits_remaining_last)) AS credits_last
  FROM ${db}.${daily ? "reports_daily" : "reports_minute"}
  WHERE project_id = {project:String}
    AND bucket >= {from:${type}} AND bucket < {to:${type}}${filters}
  GROUP BY provider
  ORDER BY provider`;
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

export async function readSpend(
  deps: SpendDeps,
  project: KeyLookup,
  q: z.output<typeof spendQuery>,
): Promise<z.infer<typeof spendResponse>> {
  const range = resolveRange(q, (deps.now ?? Date.now)());
  // Minute rollups while the range, widened to whole minutes, is within their cap.
  const inMinutes = widen(range, "minute");
  const daily = inMinutes.to - inMinutes.from > MAX_RANGE_MS.minute;
  const aligned = alignRange(range, daily ? "day" : "minute");
  const param = daily ? chDate : chSeconds;
  const { sql, params } = filterSql(q);
  const rows = await deps.store.rows<SpendRow>(spendSql(deps.store.db, daily, sql), {
    project: project.projectId,
    from: param(aligned.from),
    to: param(aligned.to),
    ...params,
  });
  const hours = (aligned.to - aligned.from) / 3_600_000;
  return {
    from: new Date(aligned.from).toISOString(),
    to: new Date(aligned.to).toISOString(),
    providers: rows.map((r) => {
      const cost = Number(r.cost);
      const burn = cost / hours;
      const credits = num(r.credits_last);
      return {
        provider: r.provider,
        cost,
        requests: Number(r.requests),
        burn_per_hour: round(burn, 6),
        credits_remaining: credits,
        hours_until_depleted:
          credits === null || !(burn > 0) ? null : round(Math.max(0, credits) / burn, 2),
      };
    }),
  };
}

export const spendRoutes: FastifyPluginAsync<SpendDeps> = async (app, deps) => {
  app.get("/api/v1/spend", async (req) => {
    const q = parseQuery(spendQuery, req.query);
    return readSpend(deps, req.project as KeyLookup, q);
  });
};
