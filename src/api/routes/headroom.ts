import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { HISTORY_WINDOW_MS, type Point } from "../../alerts/burn-rate.js";
import { BURN_UNITS, UNKNOWN_REASONS } from "../../alerts/now-model.js";
import type { AlertRule, Metric } from "../../alerts/rule.js";
import {
  type LatestFigures,
  type RecentPoints,
  STATUSES,
  seriesView,
} from "../../headroom/headroom-view.js";
import { type HotSeries, hotFigures, seriesField } from "../../headroom/hot-series.js";
import type { HotStore } from "../../headroom/hot-store.js";
import type { HotVersions } from "../../headroom/hot-versions.js";
import { unavailable } from "../../http/errors.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { filterSql, parseQuery, type SeriesFilters, seriesFilters } from "../params.js";
import type { QueryCache } from "../query-cache.js";
import { num, type ReadStore } from "../read-store.js";
import { chTime } from "../time-range.js";

// GET /api/v1/headroom: the latest figures of each series (latest_limits), with the burn rate
// over its recent reports and a status by the project's alert rules. Read from the hot copy the
// ingest workers keep in Redis (hot-store.ts); a project whose copy is not whole (Redis lost it)
// is refilled from ClickHouse first, once per process at a time.

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
  /** The hot copy in Redis; without it every request asks ClickHouse. */
  hot?: HotStore;
  /**
   * Answers shared by identical requests for a short time (READ_HEADROOM_TTL_MS) while the hot
   * copy's version is the one they were made from: a project's dashboards and programs polling
   * at once cost one read of the hot copy, not one each, and a report shows no later for it.
   */
  answers?: QueryCache;
  /** Versions pushed by the workers: a held answer found current without a round trip. */
  versions?: HotVersions;
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

/** A project's series from ClickHouse, as the hot copy keeps them. */
async function fromClickHouse(
  store: ReadStore,
  project: string,
  now: number,
): Promise<Map<string, HotSeries>> {
  const since = Math.floor(now / 1000) * 1000 - HISTORY_WINDOW_MS;
  const [latest, points] = await Promise.all([
    store.rows<LatestRow>(latestSql(store.db, ""), { project }),
    store.rows<PointRow>(pointsSql(store.db, ""), { project, since: chTime(since) }),
  ]);
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  const out = new Map<string, HotSeries>();
  for (const r of latest) {
    const f = latestFigures(r);
    out.set(seriesField(r), {
      ls: f.lastSeen,
      ...(f.limitsAt === null
        ? {}
        : {
            la: f.limitsAt,
            li: "",
            l: [
              r.requests_limit,
              r.requests_remaining,
              r.tokens_limit,
              r.tokens_remaining,
              r.reset_requests_ms,
              r.reset_tokens_ms,
            ].map(text),
          }),
      ...(f.creditsAt === null
        ? {}
        : { ca: f.creditsAt, ci: "", c: [r.credits_limit, r.credits_remaining].map(text) }),
      p: {},
    });
  }
  for (const [key, recent] of groupPoints(points)) {
    const s = out.get(key);
    if (!s) continue;
    for (const m of ["requests", "tokens", "credits"] as const) {
      if (recent[m].length > 0) s.p[m] = recent[m].map(([t, v]) => [t, String(v)]);
    }
  }
  return out;
}

const matching = (filters: SeriesFilters, s: LatestFigures) =>
  (!filters.provider || filters.provider.includes(s.provider)) &&
  (!filters.model || filters.model.includes(s.model)) &&
  (!filters.app || filters.app.includes(s.app));

const refills = new WeakMap<HotStore, Map<string, Promise<Map<string, HotSeries>>>>();

/** Redis failing under the hot copy is a 503, as ClickHouse failing is (read-store.ts). */
async function orUnavailable<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    const e = unavailable("the store cannot answer right now");
    e.cause = err;
    throw e;
  }
}

/** The project's hot copy; refilled from ClickHouse when Redis has none (one refill at a time). */
async function hotSeries(deps: HeadroomDeps, hot: HotStore, project: string, now: number) {
  const kept = await orUnavailable(hot.read(project));
  if (kept) return kept;
  let pending = refills.get(hot);
  if (!pending) {
    pending = new Map();
    refills.set(hot, pending);
  }
  let refill = pending.get(project);
  if (!refill) {
    const inFlight = pending;
    refill = (async () => {
      const series = await fromClickHouse(deps.store, project, now);
      await orUnavailable(hot.refill(project, series));
      return series;
    })().finally(() => inFlight.delete(project));
    pending.set(project, refill);
  }
  const series = await refill;
  // What Redis holds now: the refill merged with what workers wrote meanwhile.
  return (await orUnavailable(hot.read(project))) ?? series;
}

/** What the caller has read already (the route: the hot copy and the rules, at once). */
interface Given {
  series?: Map<string, HotSeries>;
  rules?: Promise<AlertRule[]>;
}

/** The answer for the key's project. */
export async function readHeadroom(
  deps: HeadroomDeps,
  project: KeyLookup,
  filters: SeriesFilters,
  given: Given = {},
): Promise<z.infer<typeof headroomResponse>> {
  const now = (deps.now ?? Date.now)();
  if (deps.hot) return readHot(deps, deps.hot, project, filters, now, given);
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

async function readHot(
  deps: HeadroomDeps,
  hot: HotStore,
  project: KeyLookup,
  filters: SeriesFilters,
  now: number,
  given: Given,
): Promise<z.infer<typeof headroomResponse>> {
  const [series, rules] = await Promise.all([
    given.series ?? hotSeries(deps, hot, project.projectId, now),
    given.rules ?? deps.rulesFor(project.projectId),
  ]);
  const since = Math.floor(now / 1000) * 1000 - HISTORY_WINDOW_MS;
  const views = [];
  for (const [field, s] of series) {
    const { latest, recent } = hotFigures(field, s, since);
    if (!matching(filters, latest)) continue;
    views.push({ latest, recent });
  }
  // ClickHouse's order: provider, model, app, by bytes.
  const bytes = (x: string, y: string) => Buffer.compare(Buffer.from(x), Buffer.from(y));
  views.sort(
    ({ latest: a }, { latest: b }) =>
      bytes(a.provider, b.provider) || bytes(a.model, b.model) || bytes(a.app, b.app),
  );
  return {
    at: new Date(now).toISOString(),
    series: views.map((v) =>
      seriesView(v.latest, v.recent, rules, { now, staleAfterMs: deps.staleAfterMs }),
    ),
  };
}

interface HeldAnswer {
  version: string | null;
  body: Buffer;
}

/** What a held answer keeps alive: its bytes. */
export const heldAnswerBytes = (a: unknown) => (a as HeldAnswer).body.length;

export const headroomRoutes: FastifyPluginAsync<HeadroomDeps> = async (app, deps) => {
  const { answers, hot } = deps;
  const answerOf = async (
    project: KeyLookup,
    filters: SeriesFilters,
    version: string | null,
    given?: Given,
  ): Promise<HeldAnswer> => ({
    version,
    // Kept as bytes: serialised and encoded once per shared answer.
    body: Buffer.from(JSON.stringify(await readHeadroom(deps, project, filters, given))),
  });

  app.get("/api/v1/headroom", async (req, reply) => {
    const filters = parseQuery(headroomQuery, req.query);
    const project = req.project as KeyLookup;
    let answer: HeldAnswer;
    if (!answers || !hot) {
      answer = await answerOf(project, filters, null);
    } else {
      // An answer is kept only while it is current: a write moves the version on, so sharing
      // never delays a report by more than a read. The version pushed by the workers says so
      // without a round trip; else the hot copy's version, with the copy itself unless the
      // answer held was made from it, in one.
      const key = JSON.stringify(["headroom", filters]);
      const held = answers.peek<HeldAnswer>(project.projectId, key);
      const pushed = deps.versions?.current(project.projectId);
      if (held !== undefined && pushed !== undefined && held.version === pushed) {
        return reply.type("application/json; charset=utf-8").send(held.body);
      }
      deps.versions?.track(project.projectId);
      // The rules are asked for at the same time (a cache, in Redis every ALERTS_RULES_TTL_MS).
      const rules = deps.rulesFor(project.projectId);
      rules.catch(() => {}); // awaited below when an answer is made; unused otherwise
      const snap = await orUnavailable(hot.snapshot(project.projectId, held?.version ?? null));
      const { version, series } = snap;
      deps.versions?.read(project.projectId, version);
      answer =
        version === null
          ? await answerOf(project, filters, null, { rules })
          : await answers.get(
              project.projectId,
              key,
              () => answerOf(project, filters, version, { series, rules }),
              (h) => h.version === version,
            );
    }
    return reply.type("application/json; charset=utf-8").send(answer.body);
  });
};
