import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { HISTORY_WINDOW_MS, type Point } from "../../alerts/burn-rate.js";
import type { AlertRule, Metric } from "../../alerts/rule.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { type LatestFigures, type RecentPoints, STATUSES, seriesView } from "../headroom-view.js";
import { filterSql, parseQuery, type SeriesFilters, seriesFilters } from "../params.js";
import { num, type ReadStore } from "../read-store.js";
import { chTime } from "../time-range.js";

// GET /api/v1/headroom: the latest figures of each series (latest_limits), with the burn rate
// over its recent reports and a status by the project's alert rules.

export const headroomQuery = z.strictObject(seriesFilters);

const metricView = z.object({
  limit: z.number().nullable(),
  remaining: z.number().nullable(),
  used_pct: z.number().nullable(),
  resets_at: z.string().nullable(),
  burn_per_s: z.number().nullable(),
  exhaustion_eta_s: z.number().nullable(),
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
    }),
  ),
});

export interface HeadroomDeps {
  store: ReadStore;
  rulesFor(project: string): Promise<AlertRule[]>;
  staleAfterMs: number;
  now?: () => number;
}

interface LatestRow {
  provider: string;
  model: string;
  app: string;
  last_seen: string;
  limits_at: string | null;
  credits_at: string | null;
  requests_limit: string | null;
  requests_remaining: string | null;
  tokens_limit: string | null;
  tokens_remaining: string | null;
  reset_requests_ms: string | null;
  reset_tokens_ms: string | null;
  credits_limit: number | null;
  credits_remaining: number | null;
}

interface PointRow {
  provider: string;
  model: string;
  app: string;
  t: string;
  requests_remaining: string | null;
  tokens_remaining: string | null;
  credits_remaining: number | null;
}

/** Recent points are read at most this many per request: the burn rate needs a few per series. */
const MAX_POINTS = 50_000;

function latestSql(db: string, filters: string) {
  return `SELECT provider, model, app, last_seen, limits_at, credits_at,
    l.requests_limit AS requests_limit, l.requests_remaining AS requests_remaining,
    l.tokens_limit AS tokens_limit, l.tokens_remaining AS tokens_remaining,
    l.reset_requests_ms AS reset_requests_ms, l.reset_tokens_ms AS reset_tokens_ms,
    toFloat64(c.credits_limit) AS credits_limit, toFloat64(c.credits_remaining) AS credits_remaining
  FROM (
    SELECT provider, model, app,
      toUnixTimestamp64Milli(max(last_seen)) AS last_seen,
      toUnixTimestamp64Milli(max(limits_at)) AS limits_at,
      toUnixTimestamp64Milli(max(credits_at)) AS credits_at,
      argMaxIfMerge(limits) AS l,
      argMaxIfMerge(credits) AS c
    FROM ${db}.latest_limits
    WHERE project_id = {project:String}${filters}
    GROUP BY provider, model, app
  )
  ORDER BY provider, model, app`;
}

function pointsSql(db: string, filters: string) {
  return `SELECT provider, model, app, toUnixTimestamp64Milli(timestamp) AS t,
    requests_remaining, tokens_remaining, toFloat64(credits_remaining) AS credits_remaining
  FROM ${db}.reports
  WHERE project_id = {project:String} AND timestamp >= {since:DateTime64(3)}${filters}
  ORDER BY provider, model, app, timestamp, report_id
  LIMIT ${MAX_POINTS}`;
}

const seriesKey = (r: { provider: string; model: string; app: string }) =>
  JSON.stringify([r.provider, r.model, r.app]);

function latestFigures(r: LatestRow): LatestFigures {
  return {
    provider: r.provider,
    model: r.model,
    app: r.app,
    lastSeen: Number(r.last_seen),
    limitsAt: num(r.limits_at),
    creditsAt: num(r.credits_at),
    requests: {
      limit: num(r.requests_limit),
      remaining: num(r.requests_remaining),
      resetMs: num(r.reset_requests_ms),
    },
    tokens: {
      limit: num(r.tokens_limit),
      remaining: num(r.tokens_remaining),
      resetMs: num(r.reset_tokens_ms),
    },
    credits: { limit: num(r.credits_limit), remaining: num(r.credits_remaining) },
  };
}

function groupPoints(rows: PointRow[]): Map<string, RecentPoints> {
  const out = new Map<string, RecentPoints>();
  const columns: Record<Metric, keyof PointRow> = {
    requests: "requests_remaining",
    tokens: "tokens_remaining",
    credits: "credits_remaining",
  };
  for (const r of rows) {
    const key = seriesKey(r);
    let points = out.get(key);
    if (!points) {
      points = { requests: [], tokens: [], credits: [] };
      out.set(key, points);
    }
    for (const metric of ["requests", "tokens", "credits"] as const) {
      const remaining = num(r[columns[metric]]);
      if (remaining !== null) points[metric].push([Number(r.t), remaining] as Point);
    }
  }
  return out;
}

export async function readHeadroom(
  deps: HeadroomDeps,
  project: KeyLookup,
  filters: SeriesFilters,
): Promise<z.infer<typeof headroomResponse>> {
  const now = (deps.now ?? Date.now)();
  const { sql, params } = filterSql(filters);
  const { db } = deps.store;
  // Whole seconds: requests within the same second share the query.
  const since = Math.floor(now / 1000) * 1000 - HISTORY_WINDOW_MS;
  const [latest, points, rules] = await Promise.all([
    deps.store.rows<LatestRow>(latestSql(db, sql), { project: project.projectId, ...params }),
    deps.store.rows<PointRow>(pointsSql(db, sql), {
      project: project.projectId,
      since: chTime(since),
      ...params,
    }),
    deps.rulesFor(project.projectId),
  ]);
  const recent = groupPoints(points);
  const empty: RecentPoints = { requests: [], tokens: [], credits: [] };
  return {
    at: new Date(now).toISOString(),
    series: latest.map((r) =>
      seriesView(latestFigures(r), recent.get(seriesKey(r)) ?? empty, rules, {
        now,
        staleAfterMs: deps.staleAfterMs,
      }),
    ),
  };
}

export const headroomRoutes: FastifyPluginAsync<HeadroomDeps> = async (app, deps) => {
  app.get("/api/v1/headroom", async (req) => {
    const filters = parseQuery(headroomQuery, req.query);
    return readHeadroom(deps, req.project as KeyLookup, filters);
  });
};
