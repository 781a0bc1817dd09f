import type { z } from "zod";
import { HISTORY_WINDOW_MS } from "../../alerts/burn-rate.js";
import type { DeriveWindows } from "../../alerts/row-windows.js";
import { type AlertRule, METRICS as METRIC_NAMES, type Metric } from "../../alerts/rule.js";
import { type LatestFigures, seriesView } from "../../headroom/headroom-view.js";
import { type HotSeries, hotFigures, hotUpdates, seriesField } from "../../headroom/hot-series.js";
import type { HotStore } from "../../headroom/hot-store.js";
import type { HotVersions } from "../../headroom/hot-versions.js";
import { type PoolGroup, poolsOf } from "../../headroom/pool-view.js";
import { unavailable } from "../../http/errors.js";
import type { KeyLookup } from "../../keys/key-store.js";
import {
  type DeclarationsReader,
  declaredFor,
  type ProjectDeclarations,
} from "../../providers/declared-limit.js";
import { deriveWindows } from "../../providers/derive-windows.js";
import { REPORT_COLUMNS, type ReportRow } from "../../report/report-schema.js";
import { filterSql, type SeriesFilters } from "../params.js";
import type { QueryCache } from "../query-cache.js";
import { num, type ReadStore } from "../read-store.js";
import type { headroomResponse } from "../schemas/headroom.js";
import { chTime } from "../time-range.js";

// The series of GET /api/v1/headroom (and of /metrics' gauges and /spend's credits): read from
// the hot copy in Redis, refilled from ClickHouse (its SQL and row mapping here) when Redis has
// none, or read from ClickHouse for each request without a hot copy.

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
  /** How windows are derived from ClickHouse's figures (the workers' derive; a test's own). */
  deriveWindows?: DeriveWindows;
  /**
   * The project's declared limits (docs/providers.md): absent, none are declared. The read API
   * asks it once per answer, beside the hot copy and the rules; it caches as it sees fit.
   */
  declarations?: DeclarationsReader;
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
  return `SELECT ${ROW_COLUMNS}, toUnixTimestamp64Milli(timestamp) AS t
  FROM ${db}.reports
  WHERE project_id = {project:String} AND timestamp >= {since:DateTime64(3)}${filters}
  ORDER BY provider, model, app, timestamp, report_id
  LIMIT ${MAX_POINTS}`;
}

/** The stored report's columns, in the order of a row (REPORT_COLUMNS), as ClickHouse gives them. */
const ROW_COLUMNS = REPORT_COLUMNS.join(", ");

/**
 * The newest stored report with limits and the newest with credits of each series, whole: their
 * windows are derived as the workers derive them (hot-series.ts, from every column a row has:
 * the kept headers and error body too once `reports` stores them).
 */
function newestRowsSql(db: string, filters: string) {
  return `SELECT ${ROW_COLUMNS}
  FROM ${db}.reports
  WHERE project_id = {project:String}${filters}
    AND (provider, model, app, timestamp) IN (
      SELECT provider, model, app, t FROM (
        SELECT provider, model, app, max(limits_at) AS la, max(credits_at) AS ca
        FROM ${db}.latest_limits
        WHERE project_id = {project:String}${filters}
        GROUP BY provider, model, app
      ) ARRAY JOIN [la, ca] AS t
    )
  ORDER BY provider, model, app, timestamp, report_id
  LIMIT ${MAX_POINTS}`;
}

const seriesKey = (r: { provider: string; model: string; app: string }) =>
  JSON.stringify([r.provider, r.model, r.app]);

const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
/** A stored row as an object (JSONEachRow) → its positional form (REPORT_COLUMNS order). */
const rowOf = (r: Record<string, unknown>): ReportRow =>
  REPORT_COLUMNS.map((c) => (r[c] ?? null) as ReportRow[number]);

/** A project's series from ClickHouse (those `filters` keep), as the hot copy keeps them. */
async function fromClickHouse(
  store: ReadStore,
  project: string,
  now: number,
  filters: SeriesFilters = {},
  derive: DeriveWindows = deriveWindows,
): Promise<Map<string, HotSeries>> {
  const { sql, params } = filterSql(filters);
  // Whole seconds: requests within the same second share the query.
  const since = Math.floor(now / 1000) * 1000 - HISTORY_WINDOW_MS;
  const [latest, points, newest] = await Promise.all([
    store.rows<LatestRow>(latestSql(store.db, sql), { project, ...params }),
    store.rows<PointRow>(pointsSql(store.db, sql), { project, since: chTime(since), ...params }),
    store.rows<Record<string, unknown>>(newestRowsSql(store.db, sql), { project, ...params }),
  ]);
  // The windows, as the workers make them: the newest rows and the recent ones, derived whole.
  const windows =
    hotUpdates(
      [...newest, ...(points as unknown as Record<string, unknown>[])].map(rowOf),
      derive,
    ).get(project) ?? new Map<string, HotSeries>();
  const out = new Map<string, HotSeries>();
  for (const r of latest) {
    const limitsAt = num(r.limits_at);
    const creditsAt = num(r.credits_at);
    // The pool is the newest stored row's with figures (the newest overall is not kept apart).
    // Counts (HotSeries.k) are not read back: what these rows hold of them is a part, which the
    // copy's own counts would add to; a copy lost with Redis counts again from its next batch.
    const { w, wp, g, x, o, lw } = windows.get(seriesField(r)) ?? {};
    out.set(seriesField(r), {
      ls: Number(r.last_seen),
      ...(limitsAt === null
        ? {}
        : {
            la: limitsAt,
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
      ...(creditsAt === null
        ? {}
        : { ca: creditsAt, ci: "", c: [r.credits_limit, r.credits_remaining].map(text) }),
      p: {},
      ...(w ? { w } : {}),
      ...(wp ? { wp } : {}),
      ...(g ? { g } : {}),
      ...(x ? { x } : {}),
      ...(o === undefined ? {} : { o }),
      ...(lw ? { lw } : {}),
    });
  }
  const remaining: Record<Metric, keyof PointRow> = {
    requests: "requests_remaining",
    tokens: "tokens_remaining",
    credits: "credits_remaining",
  };
  for (const r of points) {
    const s = out.get(seriesKey(r));
    if (!s) continue;
    const t = Number(r.t);
    for (const m of METRIC_NAMES) {
      const v = num(r[remaining[m]]);
      if (v === null) continue;
      const list = s.p[m] ?? [];
      list.push([t, String(v)]);
      s.p[m] = list;
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
export async function orUnavailable<T>(p: Promise<T>): Promise<T> {
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
      const series = await fromClickHouse(deps.store, project, now, {}, deps.deriveWindows);
      await orUnavailable(hot.refill(project, series));
      return series;
    })().finally(() => inFlight.delete(project));
    pending.set(project, refill);
  }
  const series = await refill;
  // What Redis holds now: the refill merged with what workers wrote meanwhile.
  return (await orUnavailable(hot.read(project))) ?? series;
}

/**
 * A project's series as /headroom reads them: the hot copy (refilled from ClickHouse when Redis
 * has none), else ClickHouse's.
 */
export function projectSeries(
  deps: HeadroomDeps,
  project: string,
  now: number,
): Promise<Map<string, HotSeries>> {
  return deps.hot
    ? hotSeries(deps, deps.hot, project, now)
    : fromClickHouse(deps.store, project, now, {}, deps.deriveWindows);
}

const NONE_DECLARED: ProjectDeclarations = Object.freeze({ limits: [], pools: [] });

/** The project's declarations, or none when no reader is wired; a reader failing is a 503. */
export function declarationsOf(deps: HeadroomDeps, project: string): Promise<ProjectDeclarations> {
  return deps.declarations
    ? orUnavailable(deps.declarations.forProject(project))
    : Promise.resolve(NONE_DECLARED);
}

/** A series' pool label (HotSeries.g: `l:<label>`), or null. */
const labelOf = (s: HotSeries) =>
  Array.isArray(s.g) && String(s.g[2] ?? "").startsWith("l:") ? String(s.g[2]).slice(2) : null;

/** What the caller has read already (the route: the hot copy and the rules, at once). */
export interface Given {
  series?: Map<string, HotSeries>;
  rules?: Promise<AlertRule[]>;
}

/** What /headroom answers: per pool and per app (the default), or one of them. */
export type HeadroomGroup = "pool" | "app" | "both";

/** The answer for the key's project (`headroom stats` asks with the project alone). */
export async function readHeadroom(
  deps: HeadroomDeps,
  project: Pick<KeyLookup, "projectId">,
  filters: SeriesFilters & { group?: HeadroomGroup },
  given: Given = {},
): Promise<z.infer<typeof headroomResponse>> {
  const now = (deps.now ?? Date.now)();
  if (deps.hot) return readHot(deps, deps.hot, project, filters, now, given);
  // Without the hot copy: the same series, read from ClickHouse for this request.
  const series = await fromClickHouse(
    deps.store,
    project.projectId,
    now,
    filters,
    deps.deriveWindows,
  );
  return readHot(deps, deps.hot, project, filters, now, { ...given, series });
}

async function readHot(
  deps: HeadroomDeps,
  hot: HotStore | undefined,
  project: Pick<KeyLookup, "projectId">,
  filters: SeriesFilters & { group?: HeadroomGroup },
  now: number,
  given: Given,
): Promise<z.infer<typeof headroomResponse>> {
  const [series, rules, declarations] = await Promise.all([
    given.series ?? (hot ? hotSeries(deps, hot, project.projectId, now) : new Map()),
    given.rules ?? deps.rulesFor(project.projectId),
    declarationsOf(deps, project.projectId),
  ]);
  const since = Math.floor(now / 1000) * 1000 - HISTORY_WINDOW_MS;
  const group = filters.group ?? "both";
  const at = new Date(now).toISOString();
  const pools =
    group === "app"
      ? undefined
      : poolViews(series, filters, rules, since, now, deps.staleAfterMs, declarations);
  if (group === "pool") return { at, pools };
  const views = [];
  for (const [field, s] of series) {
    const { latest, recent } = hotFigures(field, s, since);
    if (!matching(filters, latest)) continue;
    views.push({ latest, recent, label: labelOf(s) });
  }
  // ClickHouse's order: provider, model, app, by bytes.
  views.sort(
    ({ latest: a }, { latest: b }) =>
      bytes(a.provider, b.provider) || bytes(a.model, b.model) || bytes(a.app, b.app),
  );
  return {
    at,
    series: views.map((v) =>
      seriesView(v.latest, v.recent, rules, {
        now,
        staleAfterMs: deps.staleAfterMs,
        declared: declaredFor(declarations, {
          provider: v.latest.provider,
          model: v.latest.model,
          label: v.label,
        }),
      }),
    ),
    ...(pools ? { pools } : {}),
  };
}

const bytes = (x: string, y: string) => Buffer.compare(Buffer.from(x), Buffer.from(y));

/** A pool's answer: its series view (the pool's figures through the model of now) and members. */
export function poolView(
  pool: PoolGroup,
  rules: AlertRule[],
  since: number,
  now: number,
  staleAfterMs: number,
  declarations: ProjectDeclarations = NONE_DECLARED,
) {
  const { latest, recent } = hotFigures(pool.field, pool.series, since);
  latest.apps = pool.members.map((m) => m.app);
  const declared = declaredFor(declarations, pool);
  const { app: _app, ...view } = seriesView(latest, recent, rules, {
    now,
    staleAfterMs,
    declared,
  });
  return {
    pool: pool.id,
    kind: pool.kind,
    label: pool.label,
    ...view,
    members: pool.members.map((m) => ({
      app: m.app,
      key_id: m.keyId,
      last_seen: new Date(m.lastSeen).toISOString(),
    })),
  };
}

/** The project's pools that `filters` keep (an app filter keeps the pools it is a member of). */
export function poolViews(
  series: Map<string, HotSeries>,
  filters: SeriesFilters,
  rules: AlertRule[],
  since: number,
  now: number,
  staleAfterMs: number,
  declarations: ProjectDeclarations = NONE_DECLARED,
) {
  return sortedPools(series, filters).map((p) =>
    poolView(p, rules, since, now, staleAfterMs, declarations),
  );
}

/** The project's pools that `filters` keep, in the answer's order: provider, model, first member. */
export function sortedPools(series: Map<string, HotSeries>, filters: SeriesFilters = {}) {
  const pools = poolsOf(series).filter(
    (p) =>
      (!filters.provider || filters.provider.includes(p.provider)) &&
      (!filters.model || filters.model.includes(p.model)) &&
      (!filters.app || p.members.some((m) => filters.app?.includes(m.app))),
  );
  pools.sort(
    (a, b) =>
      bytes(a.provider, b.provider) ||
      bytes(a.model, b.model) ||
      bytes((a.members[0] as { app: string }).app, (b.members[0] as { app: string }).app),
  );
  return pools;
}
