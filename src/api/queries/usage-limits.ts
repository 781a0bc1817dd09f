import { createHash } from "node:crypto";
import { type CountedDimension, isCounted, resetKindOf } from "../../alerts/counted-windows.js";
import { parseWindowKey, windowKey } from "../../alerts/row-windows.js";
import type { HotSeries } from "../../headroom/hot-series.js";
import { placeOf } from "../../headroom/pool-view.js";
import {
  type DeclaredLimit,
  declaredFor,
  type ProjectDeclarations,
} from "../../providers/declared-limit.js";
import type { WindowLength } from "../../providers/window.js";
import {
  type CountedLimit,
  type CountedSlot,
  type Peaks,
  type SlotPlan,
  SlotSums,
  slotPlan,
  worstCountedPct,
} from "../counted-buckets.js";
import { invalidQuery } from "../params.js";
import type { ReadStore } from "../read-store.js";
import { declarationsOf, type HeadroomDeps, projectSeries } from "./headroom.js";
import type { UsageGroup } from "../schemas/usage.js";
import { chDate, chSeconds, type Range, WINDOW_MS, type Window } from "../time-range.js";

// /usage's windows with a learned or declared limit (issue 45, docs/read-api.md): the limits that
// apply now (the project's declarations, the limits its series learned from 429s, as the hot copy
// keeps them) applied to the whole range asked. Two uses:
//
// - a window the provider states a remaining of but no limit (Azure) takes the limit in the SQL
//   of the windows' rollups (`appliedLimitSql`);
// - a window no report states a remaining of is counted (counted-buckets.ts) from the rollups'
//   counted reports (migration 14), read by one more query bounded by the series with such a
//   limit, and none when the project has none.
//
// Per series, or per pool when grouped by pool without app: its members' counts add up, its pool
// being the one each member is in now (the hot copy's), and its limits the pool's.

/** The limits that apply to one series or pool. */
interface Unit {
  provider: string;
  model: string;
  /** The series' app; null for a pool of several. */
  app: string | null;
  /** The pool key rows name (pool-key.ts, or "app:" and the app). */
  poolKey: string;
  counted: CountedLimit[];
}

/** Learned limits by window key: [when learned (ms), limit]. */
type Learned = Map<string, [number, number]>;

/** What a project's limits give a range's query: none when it has no limit. */
export interface UsageLimits {
  /** Per series (provider, model, app) and window key: the limit a stated window without one takes. */
  applied: Map<string, number>;
  /** Per series (seriesField): its placement and learned limits. */
  series: Map<string, { poolKey: string; learned: Learned }>;
  /** Per pool ([provider, model, pool key]): the newest limit its members learned of each window. */
  pools: Map<string, Learned>;
  declarations: ProjectDeclarations;
  /** The (provider, model) pairs with a counted window (JSON). */
  countedModels: Set<string>;
  /** How each counted window of the project resets (which slots its buckets need). */
  resets: CountedLimit[];
}

const SEP = "\u0000";
export const appliedKey = (provider: string, model: string, app: string, window: string) =>
  [provider, model, app, window].join(SEP);

/** A series' limits that count: learned (the newest) over declared, as composeWindows takes them. */
function limitsOf(
  declared: readonly DeclaredLimit[],
  learned: Learned,
): Map<string, { dimension: string; window: WindowLength | null; limit: number }> {
  const out = new Map<string, { dimension: string; window: WindowLength | null; limit: number }>();
  for (const d of declared) out.set(windowKey(d), d);
  for (const [key, [, limit]] of learned) out.set(key, { ...parseWindowKey(key), limit });
  return out;
}

function countable(
  provider: string,
  limits: Iterable<{ dimension: string; window: WindowLength | null; limit: number }>,
): CountedLimit[] {
  const out: CountedLimit[] = [];
  for (const l of limits) {
    const reset = resetKindOf(provider, l.window);
    if (reset && l.window !== null && isCounted(l.dimension) && l.limit > 0)
      out.push({ dimension: l.dimension, window: l.window, limit: l.limit, reset });
  }
  return out;
}

/** A series' learned limits, added to `into` where newer (a pool's members: the newest wins). */
const learnedOf = (s: HotSeries, into: Learned = new Map()) => {
  for (const [key, fig] of Object.entries(s.lw ?? {})) {
    if (!Array.isArray(fig) || typeof fig[0] !== "number") continue;
    const limit = Number(fig[2]);
    const kept = into.get(key);
    if (Number.isFinite(limit) && limit > 0 && (!kept || fig[0] >= kept[0]))
      into.set(key, [fig[0], limit]);
  }
  return into;
};

const labelOf = (poolKey: string) => (poolKey.startsWith("l:") ? poolKey.slice(2) : null);

/** The project's limits as /usage applies them, or null when it has none (nothing more to ask). */
export function usageLimits(
  declarations: ProjectDeclarations,
  hot: Map<string, HotSeries>,
): UsageLimits | null {
  const series: UsageLimits["series"] = new Map();
  const pools: UsageLimits["pools"] = new Map();
  const applied = new Map<string, number>();
  const countedModels = new Set<string>();
  const resets: CountedLimit[] = [];
  const add = (provider: string, model: string, counted: CountedLimit[]) => {
    if (counted.length === 0) return;
    countedModels.add(JSON.stringify([provider, model]));
    resets.push(...counted);
  };
  for (const d of declarations.limits) add(d.provider, d.model, countable(d.provider, [d]));
  for (const [field, s] of hot) {
    const [provider, model, app] = JSON.parse(field) as [string, string, string];
    const poolKey = placeOf(app, s).key;
    const learned = learnedOf(s);
    series.set(field, { poolKey, learned });
    const pool = JSON.stringify([provider, model, poolKey]);
    pools.set(pool, learnedOf(s, pools.get(pool)));
    const label = labelOf(poolKey);
    const limits = limitsOf(declaredFor(declarations, { provider, model, label }), learned);
    for (const [key, l] of limits) applied.set(appliedKey(provider, model, app, key), l.limit);
    add(provider, model, countable(provider, limitsOf([], learned).values()));
  }
  if (applied.size === 0 && countedModels.size === 0) return null;
  return { applied, series, pools, declarations, countedModels, resets };
}

const byKey = <V>(entries: Iterable<[string, V]>) =>
  [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
const limitValues = (learned: Learned) => byKey([...learned].map(([k, [, limit]]) => [k, limit]));

/**
 * What a held answer's counted and applied figures were made with: limits declared, changed or
 * learned since make every bucket's % another, though no bucket's count of reports moved. The
 * limits' values only: a 429 that teaches the same limit again (Gemini's, on every call once the
 * quota is spent) changes no figure, and must not make every refresh a whole one.
 */
export const limitsKey = (limits: UsageLimits | null) =>
  limits === null
    ? ""
    : createHash("sha256")
        .update(
          JSON.stringify([
            byKey(limits.applied),
            byKey([...limits.series].map(([k, s]) => [k, [s.poolKey, limitValues(s.learned)]])),
            byKey([...limits.pools].map(([k, l]) => [k, limitValues(l)])),
            limits.declarations,
          ]),
        )
        .digest("base64");

/**
 * A window's limit in the SQL of the windows' rollups: the one stated, else the one that applies
 * (`applied`'s keys and values as parameters al_k and al_v; none: 0, which gives no %).
 */
export const appliedLimitSql = (statedMax: string) =>
  `ifNull(${statedMax}, arrayElement({al_v:Array(Float64)}, indexOf({al_k:Array(String)}, concat(provider, char(0), model, char(0), app, char(0), dimension, '@', \`window\`))))`;

export const appliedParams = (limits: UsageLimits) => ({
  al_k: [...limits.applied.keys()],
  al_v: [...limits.applied.values()],
});

interface SlotRow {
  provider: string;
  model: string;
  /** The unit's app, or its pool key when counted by pool. */
  u: string;
  /** A slot's grain (d, h, m), or a bucket's busiest minute (M) or hour (H). */
  g: "d" | "h" | "m" | "M" | "H";
  start: string | number;
  r: string | number;
  i: string | number;
  o: string | number;
  t: string | number;
}

/** Rows read at most per query: a month-long range of minutes for a few dozen series. */
export const MAX_SLOTS = 1_000_000;

const SUMS = `sum(counted_reports) AS r, sum(counted_input_tokens) AS i,
      sum(counted_output_tokens) AS o, i + o AS t`;
const COUNTED = "HAVING r > 0 OR i > 0 OR o > 0";
/** A row's unit: its app, or its pool now (the hot copy's, as parameters; else its app's). */
const unitSql = (byPool: boolean) =>
  byPool
    ? `if(indexOf({pk_k:Array(String)}, concat(provider, char(0), model, char(0), app)) AS pk_i > 0, arrayElement({pk_v:Array(String)}, pk_i), concat('app:', app))`
    : "app";
const PEAK_BUCKET: Record<Window, string> = {
  minute: "bucket",
  hour: "toStartOfHour(bucket)",
  day: "toStartOfDay(bucket)",
};

/**
 * The counted slots a plan needs (counted-buckets.ts's slotPlan): days from reports_daily, hours
 * and minutes from reports_minute, and per bucket its busiest minute or hour (grouped by minute
 * or hour, then the most per bucket: a row per bucket, however many minutes it has).
 */
function slotsSql(
  db: string,
  filters: string,
  plan: SlotPlan & { to: number },
  window: Window,
  byPool: boolean,
) {
  const unit = unitSql(byPool);
  const where = (from: string, to: string) => `project_id = {project:String}
      AND bucket >= ${from} AND bucket < ${to}
      AND provider IN {c_provider:Array(String)} AND model IN {c_model:Array(String)}${filters}`;
  const parts: string[] = [];
  if (plan.since < plan.hoursFrom)
    parts.push(`SELECT provider, model, ${unit} AS u, 'd' AS g,
      toUnixTimestamp(toDateTime(bucket, 'UTC')) * 1000 AS start, ${SUMS}
    FROM ${db}.reports_daily
    WHERE ${where("{d_from:Date}", "{d_to:Date}")}
    GROUP BY provider, model, u, start ${COUNTED}`);
  if (plan.hoursFrom < plan.to)
    parts.push(`SELECT provider, model, ${unit} AS u, if(bucket < {m_from:DateTime}, 'h', 'm') AS g,
      toUnixTimestamp(if(bucket < {m_from:DateTime}, toStartOfHour(bucket), bucket)) * 1000 AS start, ${SUMS}
    FROM ${db}.reports_minute
    WHERE ${where("{h_from:DateTime}", "{to:DateTime}")}
    GROUP BY provider, model, u, g, start ${COUNTED}`);
  for (const kind of plan.peaks)
    parts.push(`SELECT provider, model, u, '${kind === "m" ? "M" : "H"}' AS g,
      toUnixTimestamp(b) * 1000 AS start, max(r1) AS r, max(i1) AS i, max(o1) AS o, max(t1) AS t
    FROM (
      SELECT provider, model, ${unit} AS u, ${PEAK_BUCKET[window]} AS b,
        ${kind === "m" ? "bucket" : "toStartOfHour(bucket)"} AS p,
        sum(counted_reports) AS r1, sum(counted_input_tokens) AS i1,
        sum(counted_output_tokens) AS o1, i1 + o1 AS t1
      FROM ${db}.reports_minute
      WHERE ${where("{from:DateTime}", "{to:DateTime}")}
      GROUP BY provider, model, u, b, p
    )
    GROUP BY provider, model, u, b ${COUNTED}`);
  return `SELECT * FROM (
  ${parts.join("\n  UNION ALL\n  ")}
  )
  LIMIT ${MAX_SLOTS + 1}`;
}

/** A point's fields that say which group it is of (a row of /usage's query). */
export interface GroupOf {
  provider?: string;
  model?: string;
  pool?: string;
  app?: string;
}

/**
 * Per point, the worst counted % of each dimension of the series (or pools) in its group, in the
 * buckets of `range`: a function of the row and its bucket start, or null when nothing is counted.
 */
export async function countedDims(
  store: ReadStore,
  project: string,
  limits: UsageLimits,
  q: { window: Window; groups: UsageGroup[]; sql: string; params: Record<string, string[]> },
  range: Range,
  uncached: boolean,
): Promise<((r: GroupOf, bucket: number) => Record<string, number>) | null> {
  if (limits.countedModels.size === 0) return null;
  const pairs = [...limits.countedModels].map((p) => JSON.parse(p) as [string, string]);
  const span = WINDOW_MS[q.window];
  const plan = { ...slotPlan(limits.resets, range.from, range.to, span), to: range.to };
  if (plan.since >= plan.to && plan.peaks.length === 0) return null;
  const byPool = q.groups.includes("pool") && !q.groups.includes("app");
  const pools = byPool
    ? [...limits.series].map(([field, s]) => [JSON.parse(field).join(SEP), s.poolKey])
    : [];
  const rows = await store.rows<SlotRow>(
    slotsSql(store.db, q.sql, plan, q.window, byPool),
    {
      project,
      from: chSeconds(range.from),
      to: chSeconds(range.to),
      d_from: chDate(plan.since),
      d_to: chDate(plan.hoursFrom),
      h_from: chSeconds(plan.hoursFrom),
      m_from: chSeconds(plan.minutesFrom),
      ...(byPool ? { pk_k: pools.map((p) => p[0]), pk_v: pools.map((p) => p[1]) } : {}),
      c_provider: [...new Set(pairs.map((p) => p[0]))],
      c_model: [...new Set(pairs.map((p) => p[1]))],
      ...q.params,
    },
    uncached,
  );
  // Never a silent answer without them: the stated figures alone would read as the whole truth.
  if (rows.length > MAX_SLOTS)
    throw invalidQuery(
      `the counted windows of this range need more than ${MAX_SLOTS} counts: narrow from/to, use a wider window, or filter by provider, model or app`,
    );
  const units = unitsOf(limits, byPool, rows);
  if (units.length === 0) return null;
  // A point visits the units of its own group only (the fields it has, in the groups' order).
  const byGroup = new Map<string, { u: Unit; sums: SlotSums; peaks: Peaks }[]>();
  const groupKey = (f: (g: UsageGroup) => string | null | undefined) =>
    q.groups.map((g) => f(g) ?? "").join(SEP);
  for (const u of units) {
    const key = groupKey((g) =>
      g === "pool" ? u.poolKey : g === "app" ? u.app : g === "model" ? u.model : u.provider,
    );
    const list = byGroup.get(key) ?? [];
    list.push({ u, sums: new SlotSums(u.slots), peaks: u.peaks });
    byGroup.set(key, list);
  }
  return (r, bucket) => {
    const out: Record<string, number> = {};
    for (const { u, sums, peaks } of byGroup.get(groupKey((g) => r[g])) ?? []) {
      for (const l of u.counted) {
        const pct = worstCountedPct(sums, l, bucket, bucket + span, peaks);
        if (pct > 0) out[l.dimension] = Math.max(out[l.dimension] ?? 0, pct);
      }
    }
    return out;
  };
}

const peakOf = (row: SlotRow): Record<CountedDimension, number> => ({
  requests: Number(row.r),
  tokens: Number(row.t),
  input_tokens: Number(row.i),
  output_tokens: Number(row.o),
});

/** The series (or pools) counted, each with its slots in order, its peaks and its limits. */
function unitsOf(
  limits: UsageLimits,
  byPool: boolean,
  rows: SlotRow[],
): (Unit & { slots: CountedSlot[]; peaks: Peaks })[] {
  const units = new Map<
    string,
    Unit & { slots: Map<number, CountedSlot>; peaks: Peaks; learned: Learned }
  >();
  for (const row of rows) {
    const field = JSON.stringify([row.provider, row.model, byPool ? "" : row.u]);
    const s = byPool ? undefined : limits.series.get(field);
    const poolKey = byPool ? row.u : (s?.poolKey ?? `app:${row.u}`);
    const pool = JSON.stringify([row.provider, row.model, poolKey]);
    const key = byPool ? pool : field;
    let u = units.get(key);
    if (!u) {
      u = {
        provider: row.provider,
        model: row.model,
        app: byPool ? null : row.u,
        poolKey,
        counted: [],
        slots: new Map(),
        peaks: {},
        learned: (byPool ? limits.pools.get(pool) : s?.learned) ?? new Map(),
      };
      units.set(key, u);
    }
    const start = Number(row.start);
    if (row.g === "M" || row.g === "H") {
      const kind = row.g === "M" ? "m" : "h";
      const peaks = u.peaks[kind] ?? new Map();
      peaks.set(start, peakOf(row));
      u.peaks[kind] = peaks;
      continue;
    }
    const slot = u.slots.get(start) ?? { start, requests: 0, input: 0, output: 0 };
    slot.requests += Number(row.r);
    slot.input += Number(row.i);
    slot.output += Number(row.o);
    u.slots.set(start, slot);
  }
  const out: (Unit & { slots: CountedSlot[]; peaks: Peaks })[] = [];
  for (const u of units.values()) {
    const { provider, model, poolKey } = u;
    const declared = declaredFor(limits.declarations, { provider, model, label: labelOf(poolKey) });
    const counted = countable(provider, limitsOf(declared, u.learned).values());
    if (counted.length === 0) continue;
    out.push({ ...u, counted, slots: [...u.slots.values()].sort((a, b) => a.start - b.start) });
  }
  return out;
}

/**
 * The project's limits for /usage: its declarations and its hot copy's learned limits (what
 * /headroom reads: a cache and Redis, no ClickHouse unless the copy must be refilled).
 */
export async function projectLimits(
  deps: HeadroomDeps,
  project: string,
  now: number,
): Promise<UsageLimits | null> {
  const [declarations, hot] = await Promise.all([
    declarationsOf(deps, project),
    deps.hot ? projectSeries(deps, project, now) : new Map<string, HotSeries>(),
  ]);
  return usageLimits(declarations, hot);
}
