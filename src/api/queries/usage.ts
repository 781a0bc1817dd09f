import type { z } from "zod";
import { PROVIDER_HINTS_SUM } from "../../clickhouse/provider-hints.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { KNOWN_DIMENSIONS, MAX_WINDOWS } from "../../providers/window.js";
import { poolId, poolLabelOf } from "../../report/pool-key.js";
import { type EncodedAnswer, encodeJson } from "../encoded-answer.js";
import { filterSql, invalidQuery } from "../params.js";
import type { QueryCache } from "../query-cache.js";
import { num, type ReadStore } from "../read-store.js";
import type { UsageGroup, usagePoint, usageQuery, usageResponse } from "../schemas/usage.js";
import {
  alignRange,
  chDate,
  chSeconds,
  defaultWindow,
  isoOf,
  type Range,
  resolveRange,
  WINDOW_MS,
  type Window,
} from "../time-range.js";
import {
  answerJson,
  changedBuckets,
  mergeRecent,
  sameRecent,
  type UsageEntry,
} from "../usage-rolling.js";
import type { HeadroomDeps } from "./headroom.js";
import {
  appliedLimitSql,
  appliedParams,
  countedDims,
  type GroupOf,
  limitsKey,
  projectLimits,
  type UsageLimits,
} from "./usage-limits.js";

// The series of GET /api/v1/usage: SQL over the rollups (and the windows stored with each
// report), row mapping, and the two caches of shaped answers (by the rows a query cache shared,
// and the rolling "last 24 h" answers kept up to date by their newest buckets).

export interface UsageDeps {
  store: ReadStore;
  maxPoints: number;
  /**
   * Answers to "the last 24 h" (no from/to), shared by what was asked rather than by the range
   * it resolved to: a dashboard's answer stays served (within the cache's staleness bound) when
   * the minute turns, instead of every project missing at once.
   */
  answers?: QueryCache;
  /** A shared answer asks for its whole range this often, else its newest buckets (usage-rolling.ts). */
  fullRefreshMs?: number;
  /**
   * Where the project's declared and learned limits are read (/headroom's declarations and hot
   * copy): absent, /usage applies none.
   */
  headroom?: HeadroomDeps;
  now?: () => number;
}

interface UsageRow {
  bucket: string;
  provider?: string;
  model?: string;
  /** The pool's key (pool-key.ts; 'app:' and the app for an app alone): never answered as is. */
  pool?: string;
  /** The apps of the pool's rows in the bucket, sorted. */
  members?: string[];
  app?: string;
  reports: string;
  hints: string;
  rr_min: string | null;
  tr_min: string | null;
  rl_max: string | null;
  tl_max: string | null;
  used_pct_max: number | null;
  cost: number;
  credits_last: number | null;
  /** Dimension → worst % used (ClickHouse's Map as JSON); empty, or absent, without windows. */
  dims?: Record<string, number>;
}

// % of a series' limit used within a window: from its highest limit and lowest remaining, the
// worse of requests and tokens; null when neither has both figures.
const PCT = (limit: string, remaining: string) =>
  `if(${limit} > 0 AND ${remaining} IS NOT NULL, greatest(0, (${limit} - ${remaining}) / ${limit} * 100), NULL)`;
const USED_PCT = `multiIf(r_pct IS NULL, t_pct, t_pct IS NULL, r_pct, greatest(r_pct, t_pct))`;

// A group of several series (by provider, say) takes a window's remaining and limit from its
// worst series, the one with the highest used %, so the pair is true of one series; lowest
// remaining and highest limit of different models would make a figure no series had. Series
// with no used % (a limit or a remaining missing) give the lowest remaining, highest limit.
// Ties go to the highest limit: the same series for both figures.
// The series' own columns are named through `s.`: the outer aliases have the same names.
const WORST = (figure: string, pct: string, limit: string, fallback: "min" | "max") =>
  `if(countIf(s.${pct} IS NOT NULL) > 0, argMaxIf(s.${figure}, (s.${pct}, s.${limit}), s.${pct} IS NOT NULL), ${fallback}(s.${figure}))`;

const BUCKET: Record<Window, string> = {
  minute: "bucket",
  hour: "toStartOfHour(bucket)",
  day: "bucket",
};

/** The groups' columns, in ClickHouse's order: ORDER BY them is the answer's order. */
const names = (groups: UsageGroup[]) => groups.map((g) => `${g}, `).join("");

/**
 * The groups as selected over series rows joined to their pools (poolJoin): a pool is its key,
 * or its app's for a series that named none (pool-view.ts's placement, per bucket).
 */
const selected = (groups: UsageGroup[]) =>
  groups
    .map((g) =>
      g === "pool" ? "if(pool_key = '', concat('app:', app), pool_key) AS pool, " : `${g}, `,
    )
    .join("");

/**
 * Each series row's pool in its bucket (migration 12's pool rollups: the pool of its newest
 * report there), joined by series and bucket; '' when none is stored (an app alone).
 */
function poolJoin(db: string, window: Window, filters: string) {
  const table = window === "day" ? `${db}.report_pools_daily` : `${db}.report_pools_minute`;
  const paramType = window === "day" ? "Date" : "DateTime";
  return `
  LEFT JOIN (
    SELECT provider, model, app, ${BUCKET[window]} AS b, argMaxMerge(pool_key) AS pool_key
    FROM ${table}
    WHERE project_id = {project:String}
      AND bucket >= {from:${paramType}} AND bucket < {to:${paramType}}${filters}
    GROUP BY provider, model, app, b
  ) AS pk USING (provider, model, app, b)`;
}

function rollupSql(db: string, window: Window, groups: UsageGroup[], filters: string) {
  const table = window === "day" ? `${db}.reports_daily` : `${db}.reports_minute`;
  const paramType = window === "day" ? "Date" : "DateTime";
  const pools = groups.includes("pool");
  const outer = names(groups);
  return `SELECT ${selected(groups)}toString(b) AS bucket,${pools ? "\n    arraySort(groupUniqArray(app)) AS members," : ""}
    sum(reports) AS reports, sum(hints) AS hints,
    ${WORST("rr_min", "r_pct", "rl_max", "min")} AS rr_min,
    ${WORST("tr_min", "t_pct", "tl_max", "min")} AS tr_min,
    ${WORST("rl_max", "r_pct", "rl_max", "max")} AS rl_max,
    ${WORST("tl_max", "t_pct", "tl_max", "max")} AS tl_max,
    max(${USED_PCT}) AS used_pct_max,
    toFloat64(sum(cost)) AS cost,
    toFloat64(argMaxIfMerge(credits)) AS credits_last
  FROM (
    SELECT provider, model, app, ${BUCKET[window]} AS b,
      sum(reports) AS reports, ${PROVIDER_HINTS_SUM} AS hints,
      min(requests_remaining_min) AS rr_min, min(tokens_remaining_min) AS tr_min,
      max(requests_limit_max) AS rl_max, max(tokens_limit_max) AS tl_max,
      ${PCT("rl_max", "rr_min")} AS r_pct, ${PCT("tl_max", "tr_min")} AS t_pct,
      sum(cost_sum) AS cost,
      argMaxIfMergeState(credits_remaining_last) AS credits
    FROM ${table}
    WHERE project_id = {project:String}
      AND bucket >= {from:${paramType}} AND bucket < {to:${paramType}}${filters}
    GROUP BY provider, model, app, b
  ) AS s${pools ? poolJoin(db, window, filters) : ""}
  GROUP BY ${outer}b
  ORDER BY ${outer}b
  LIMIT {limit:UInt32}`;
}

/**
 * Per bucket (and group), the worst % used of each dimension across the series' windows, as one
 * map per point (dimension → %, by dimension): from the windows' rollups (migration 9: each
 * window's highest limit and lowest remaining per minute or day, as used_pct_max is from the
 * reports' rollups), so Anthropic's input and output tokens and Groq's day and minute each count.
 * A series has at most MAX_WINDOWS windows per point, as a report has (dimension names are the
 * tenant's to choose): the contract's dimensions first, then the most used.
 */
function worstByDimensionSql(
  db: string,
  window: Window,
  groups: UsageGroup[],
  filters: string,
  applied: boolean,
) {
  const table = window === "day" ? `${db}.report_windows_daily` : `${db}.report_windows_minute`;
  const paramType = window === "day" ? "Date" : "DateTime";
  const pools = groups.includes("pool");
  const outer = names(groups);
  return `SELECT ${outer}toString(b) AS bucket,
    CAST(arraySort(groupArray((dimension, used_pct))), 'Map(String, Float64)') AS dims
  FROM (
    SELECT ${selected(groups)}b, dimension, max(pct) AS used_pct
    FROM (
      SELECT provider, model, app, ${BUCKET[window]} AS b, dimension,
        ${PCT(applied ? appliedLimitSql("max(limit_max)") : "max(limit_max)", "min(remaining_min)")} AS pct
      FROM ${table}
      WHERE project_id = {project:String}
        AND bucket >= {from:${paramType}} AND bucket < {to:${paramType}}${filters}
      GROUP BY provider, model, app, b, dimension, \`window\`
      HAVING pct IS NOT NULL
      ORDER BY dimension IN (${KNOWN_DIMENSIONS.map((d) => `'${d}'`).join(", ")}) DESC, pct DESC, dimension, \`window\`
      LIMIT ${MAX_WINDOWS} BY provider, model, app, b
    ) AS w${pools ? poolJoin(db, window, filters) : ""}
    GROUP BY ${outer}b, dimension
  )
  GROUP BY ${outer}b`;
}

/**
 * The points of a range: the reports' rollups per bucket (and group), each with its worst % used
 * per dimension (`dims`) joined in ClickHouse, so that a point comes as one row (a separate query
 * of a row per dimension, merged here, made /usage's refreshes the read API's main cost). With
 * `applied`, a window stated without a limit takes the one declared or learned (usage-limits.ts).
 */
export function usageSql(
  db: string,
  window: Window,
  groups: UsageGroup[],
  filters: string,
  applied = false,
) {
  const outer = names(groups);
  return `SELECT u.*, d.dims AS dims
  FROM (${rollupSql(db, window, groups, filters)}) AS u
  LEFT JOIN (${worstByDimensionSql(db, window, groups, filters, applied)}) AS d
  USING (${outer}bucket)
  ORDER BY ${outer}bucket`;
}

/**
 * Per bucket of a range (minute or hour windows), its count of reports over every group: a
 * bucket whose count did not move since a refresh is unchanged (usage-rolling.ts). The
 * reports' rollup alone, without the windows' and pools' joins.
 */
export function bucketCountsSql(db: string, window: Exclude<Window, "day">, filters: string) {
  return `SELECT toUnixTimestamp(${BUCKET[window]}) AS b, sum(reports) AS reports
  FROM ${db}.reports_minute
  WHERE project_id = {project:String}
    AND bucket >= {from:DateTime} AND bucket < {to:DateTime}${filters}
  GROUP BY b`;
}

type UsageAnswer = z.infer<typeof usageResponse>;
type UsagePoint = z.infer<typeof usagePoint>;

/** What a query resolves to: its window, range and groups, and the SQL of its filters. */
interface Plan {
  window: Window;
  aligned: Range;
  /** What the answer says it is grouped by (as asked, in the columns' order). */
  asked: UsageGroup[];
  /** What the SQL groups by: a pool is one provider's and model's, so those come with it. */
  groups: UsageGroup[];
  sql: string;
  params: Record<string, string[]>;
}

function plan(deps: UsageDeps, q: z.output<typeof usageQuery>): Plan {
  const range = resolveRange(q, (deps.now ?? Date.now)());
  const window = q.window ?? defaultWindow(range);
  const aligned = alignRange(range, window);
  const asked = GROUP_ORDER.filter((f) => q.group_by?.includes(f));
  const groups = asked.includes("pool")
    ? GROUP_ORDER.filter((f) => f !== "app" || asked.includes("app"))
    : asked;
  return { window, aligned, asked, groups, ...filterSql(q) };
}

/** A range's rows, each with its worst % used per dimension (`dims`), in one query. */
async function queryRows(
  deps: UsageDeps,
  project: KeyLookup,
  p: Plan,
  range: Range,
  limits: UsageLimits | null,
  uncached = false,
  only?: { recentFrom: number; changed: number[] },
): Promise<UsageRow[]> {
  const param = p.window === "day" ? chDate : chSeconds;
  const applied = limits !== null && limits.applied.size > 0;
  // Only the buckets from recentFrom on and the changed ones (minute and hour windows).
  const b = BUCKET[p.window];
  const onlySql =
    only === undefined
      ? ""
      : ` AND (${b} >= {recent:DateTime} OR ${b} IN {changed:Array(DateTime)})`;
  return deps.store.rows<UsageRow>(
    usageSql(deps.store.db, p.window, p.groups, p.sql + onlySql, applied),
    {
      project: project.projectId,
      from: param(range.from),
      to: param(range.to),
      ...p.params,
      ...(applied ? appliedParams(limits) : {}),
      ...(only === undefined
        ? {}
        : { recent: chSeconds(only.recentFrom), changed: only.changed.map(chSeconds) }),
      limit: deps.maxPoints + 1,
    },
    uncached,
  );
}

/** The project's limits, when /usage is wired to read them; null when it has none. */
function limitsOf(deps: UsageDeps, project: KeyLookup, now: number) {
  return deps.headroom
    ? projectLimits(deps.headroom, project.projectId, now)
    : Promise.resolve(null);
}

type Counted = ((r: GroupOf, bucket: number) => Record<string, number>) | null;

/** A range's rows and, when the project has counted windows, their counted % (in parallel). */
async function rangeOf(
  deps: UsageDeps,
  project: KeyLookup,
  p: Plan,
  range: Range,
  limits: UsageLimits | null,
  uncached = false,
  only?: { recentFrom: number; changed: number[] },
): Promise<{ rows: UsageRow[]; counted: Counted }> {
  const [rows, counted] = await Promise.all([
    queryRows(deps, project, p, range, limits, uncached, only),
    limits ? countedDims(deps.store, project.projectId, limits, p, range, uncached) : null,
  ]);
  return { rows, counted };
}

/** The changed buckets before recentFrom: their counts of reports against the kept points'. */
async function changedSince(
  deps: UsageDeps,
  project: KeyLookup,
  p: Plan & { window: Exclude<Window, "day"> },
  previous: RollingAnswer,
  recentFrom: number,
): Promise<number[]> {
  if (recentFrom <= p.aligned.from) return [];
  const rows = await deps.store.rows<{ b: number; reports: string }>(
    bucketCountsSql(deps.store.db, p.window, p.sql),
    {
      project: project.projectId,
      from: chSeconds(p.aligned.from),
      to: chSeconds(recentFrom),
      ...p.params,
    },
    true,
  );
  const counts = new Map(rows.map((r) => [Number(r.b) * 1000, Number(r.reports)]));
  return changedBuckets(previous.entries, counts, p.aligned.from, recentFrom);
}

function tooManyPoints(maxPoints: number) {
  return invalidQuery(
    `the query would return more than ${maxPoints} points: narrow from/to, use a wider window, group by fewer fields, or filter by provider, model or app`,
  );
}

function head(p: Plan) {
  return {
    from: new Date(p.aligned.from).toISOString(),
    to: new Date(p.aligned.to).toISOString(),
    window: p.window,
    group_by: p.asked,
  };
}

/**
 * A point's dimensions, each % to two decimals (a point without windows has none): the worst of
 * its stated windows' and of its counted ones'.
 */
function dimsOf(r: UsageRow, counted: Counted): Record<string, number> {
  const all: Record<string, number> = {};
  for (const [dimension, pct] of Object.entries(r.dims ?? {})) all[dimension] = Number(pct);
  if (counted)
    for (const [dimension, pct] of Object.entries(counted(r, Date.parse(isoOf(r.bucket)))))
      all[dimension] = Math.max(all[dimension] ?? 0, pct);
  const out: Record<string, number> = {};
  for (const [dimension, pct] of Object.entries(all)) out[dimension] = Math.round(pct * 100) / 100;
  return out;
}

/**
 * The point's highest % used: the worse of its requests and tokens (the contract's figures) and
 * of every window's (Anthropic's output tokens, Groq's day, a Gemini 429's exhausted window), so a
 * report whose figures came only from its headers or error body counts (issue 45).
 */
function usedPctMax(r: UsageRow, dims: Record<string, number>): number | null {
  const all = Object.values(dims);
  if (r.used_pct_max !== null) all.push(Math.round(r.used_pct_max * 100) / 100);
  return all.length === 0 ? null : Math.max(...all);
}

/** A pool row's pool, as /headroom names it (pool-view.ts): the key itself is never answered. */
function poolOf(r: UsageRow & { pool: string }) {
  const kind = r.pool.startsWith("a:") ? "account" : r.pool.startsWith("l:") ? "label" : "app";
  return {
    pool: poolId(r.provider ?? "", r.model ?? "", r.pool),
    kind,
    label: poolLabelOf(r.pool),
    members: r.members ?? [],
  } as const;
}

function toPoint(r: UsageRow, counted: Counted = null): UsagePoint {
  const dims = dimsOf(r, counted);
  return {
    bucket: isoOf(r.bucket),
    ...(r.provider === undefined ? {} : { provider: r.provider }),
    ...(r.model === undefined ? {} : { model: r.model === "" ? null : r.model }),
    ...(r.pool === undefined ? {} : poolOf(r as UsageRow & { pool: string })),
    ...(r.app === undefined ? {} : { app: r.app }),
    reports: Number(r.reports),
    provider_hints: Number(r.hints),
    requests_remaining_min: num(r.rr_min),
    tokens_remaining_min: num(r.tr_min),
    requests_limit_max: num(r.rl_max),
    tokens_limit_max: num(r.tl_max),
    used_pct_max: usedPctMax(r, dims),
    cost: Number(r.cost),
    credits_remaining_last: num(r.credits_last),
    used_pct_by_dimension: dims,
  };
}

export async function readUsage(
  deps: UsageDeps,
  project: KeyLookup,
  q: z.output<typeof usageQuery>,
): Promise<UsageAnswer> {
  const now = (deps.now ?? Date.now)();
  const p = plan(deps, q);
  const limits = await limitsOf(deps, project, now);
  const { rows, counted } = await rangeOf(deps, project, p, p.aligned, limits);
  // A shared answer (the query cache gives every caller the same rows) is shaped once; with
  // counted windows, whose slots are rows of their own, each time.
  const shaped = counted ? undefined : answers.get(rows);
  if (shaped) return shaped;
  if (rows.length > deps.maxPoints) throw tooManyPoints(deps.maxPoints);
  const out = { ...head(p), points: rows.map((r) => toPoint(r, counted)) };
  if (!counted) answers.set(rows, out);
  return out;
}

/** A shared answer to "the last 24 h", as bytes, with what its next refresh keeps. */
export interface RollingAnswer {
  encoded: EncodedAnswer;
  groups: UsageGroup[];
  /** The start of its range, Unix ms. */
  from: number;
  window: Window;
  /** The end of its range, Unix ms. */
  to: number;
  entries: UsageEntry[];
  /** When its whole range was last read. */
  fullAt: number;
  /** The limits its counted and applied figures were made with (limitsKey). */
  limitsKey: string;
}

/**
 * What a held answer keeps alive: its JSON bytes, its points' JSON (as long again), room for a
 * compressed copy (never longer), and each point's record.
 */
export const rollingAnswerBytes = (a: unknown) => {
  const { encoded, entries } = a as RollingAnswer;
  return 3 * encoded.identity.length + 64 * entries.length;
};

/** Points shaped between two turns of the event loop (~1 ms). */
const YIELD_EVERY = 500;

/** Buckets this recent are read again at every refresh: where reports timestamped now land. */
const RECENT_MS = 5 * 60_000;

/**
 * `previous` brought up to date: its newest buckets and those whose count of reports moved read
 * again, or its whole range when it is due (`fullRefreshMs`), a day window (a few points), or
 * there is none.
 */
export async function refreshUsage(
  deps: UsageDeps,
  project: KeyLookup,
  q: z.output<typeof usageQuery>,
  previous: RollingAnswer | undefined,
): Promise<RollingAnswer> {
  const now = (deps.now ?? Date.now)();
  const p = plan(deps, q);
  const limits = await limitsOf(deps, project, now);
  const figuresKey = limitsKey(limits);
  const whole =
    previous === undefined ||
    p.window === "day" ||
    previous.window !== p.window ||
    previous.limitsKey !== figuresKey ||
    now - previous.fullAt >= (deps.fullRefreshMs ?? 0);
  const w = WINDOW_MS[p.window];
  // Never after the previous answer's end: buckets it did not cover are read too (an answer can
  // be served stale, or kept expired, for longer than RECENT_MS).
  const recent =
    whole || previous === undefined
      ? p.aligned.from
      : Math.max(p.aligned.from, Math.min(Math.floor((now - RECENT_MS) / w) * w, previous.to));
  const moved =
    whole || previous === undefined || p.window === "day"
      ? []
      : await changedSince(deps, project, { ...p, window: p.window }, previous, recent);
  // A counted window's % in a bucket is counted from its period's start (usage-limits.ts), so it
  // moves in every bucket after one whose count moved: with counted windows, all of those are
  // read again.
  const suffix = limits !== null && limits.countedModels.size > 0 && moved.length > 0;
  const recentFrom = suffix ? Math.min(recent, moved[0] as number) : recent;
  const changed = suffix ? [] : moved;
  // Past the rows' cache: the answers' cache is this query's (single flight, TTL), and rows it
  // served stale would hold the newest buckets back.
  const { rows, counted } = await rangeOf(
    deps,
    project,
    p,
    { from: changed[0] ?? recentFrom, to: p.aligned.to },
    limits,
    true,
    changed.length === 0 ? undefined : { recentFrom, changed },
  );
  if (rows.length > deps.maxPoints) throw tooManyPoints(deps.maxPoints);
  const fresh: UsageEntry[] = [];
  const groupsSeen = new Map<string, string>();
  for (const [i, r] of rows.entries()) {
    // A whole range is thousands of points: other requests are answered between slices.
    if (i > 0 && i % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
    const point = toPoint(r, counted);
    const key = JSON.stringify([r.provider ?? "", r.model ?? "", r.pool ?? "", r.app ?? ""]);
    // One string per group, however many points it has.
    let group = groupsSeen.get(key);
    if (group === undefined) {
      group = key;
      groupsSeen.set(key, key);
    }
    fresh.push({
      ms: Date.parse(point.bucket),
      group,
      json: JSON.stringify(point),
      reports: point.reports,
    });
  }
  const { from, to } = p.aligned;
  // Unchanged (the same range, the same newest buckets): the same answer, so its bytes, ETag
  // and compressed copies are kept, and nothing is serialised.
  if (
    previous !== undefined &&
    !whole &&
    moved.length === 0 &&
    previous.from === from &&
    previous.to === to &&
    sameRecent(previous.entries, fresh, recentFrom)
  ) {
    return previous;
  }
  const entries =
    previous === undefined || whole
      ? fresh
      : mergeRecent(previous.entries, fresh, p.aligned.from, recentFrom, new Set(changed));
  if (entries.length > deps.maxPoints) throw tooManyPoints(deps.maxPoints);
  const fullAt = whole ? now : (previous?.fullAt ?? now);
  const bytes = Buffer.from(answerJson(head(p), entries));
  const encoded =
    previous !== undefined && bytes.equals(previous.encoded.identity)
      ? previous.encoded
      : encodeJson(bytes, project.projectId);
  return {
    encoded,
    groups: p.groups,
    from,
    to,
    window: p.window,
    entries,
    fullAt,
    limitsKey: figuresKey,
  };
}

/** Answers by the rows they came from: a dashboard's poll costs no re-encoding. */
const answers = new WeakMap<object, z.infer<typeof usageResponse>>();

/** The groups in the columns' (and ClickHouse's ORDER BY) order. */
const GROUP_ORDER: UsageGroup[] = ["provider", "model", "pool", "app"];
