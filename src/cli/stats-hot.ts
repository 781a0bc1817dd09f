import type { ClickHouseClient } from "@clickhouse/client";
import { createRuleStore } from "../alerts/rule-store.js";
import { type HeadroomDeps, readHeadroom } from "../api/queries/headroom.js";
import { createQueryCache } from "../api/query-cache.js";
import { createReadStore } from "../api/read-store.js";
import type { Config } from "../config.js";
import { createDeclarationsReader } from "../control/declarations-cache.js";
import type { ResetKind } from "../alerts/counted-windows.js";
import type { HeadroomResponse } from "../api/schemas/headroom.js";
import type { WindowFiguresSource } from "../providers/window.js";
import { createHotStore } from "../headroom/hot-store.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom stats`' current headroom as /api/v1/headroom has it at that moment: each project's
// hot copy in Redis (refilled from ClickHouse when Redis lost it, as the read API does), its
// counted, learned and declared windows composed by the same code (readHeadroom). Bounded: the
// projects asked for, a few at a time, each copy at most READ_HOT_MAX_SERIES_PER_PROJECT series.

/** Projects read at once. */
const PROJECTS_AT_ONCE = 4;

type SeriesView = NonNullable<HeadroomResponse["series"]>[number];

export interface HotViews {
  /** Per series (statsSeriesKey), the view /headroom gives of it. */
  views: Map<string, SeriesView>;
  /** Why some or all of the figures are ClickHouse's only (Redis unreachable, a project failing). */
  notes: string[];
}

export const statsSeriesKey = (r: {
  project_id: string;
  provider: string;
  model: string;
  app: string;
}) => JSON.stringify([r.project_id, r.provider, r.model, r.app]);

const messageOf = (err: unknown) =>
  err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : `${err}`;

export async function hotViews(
  config: Config,
  clickhouse: ClickHouseClient,
  projects: string[],
): Promise<HotViews> {
  const views = new Map<string, SeriesView>();
  const notes: string[] = [];
  if (projects.length === 0) return { views, notes };
  let redis: Awaited<ReturnType<typeof connectRedis>>;
  try {
    redis = await connectRedis(config);
  } catch (err) {
    return { views, notes: [`no hot copy (${messageOf(err)})`] };
  }
  try {
    const rules = createRuleStore(redis, config.QUEUE_PREFIX);
    const deps: HeadroomDeps = {
      // A refill's three queries, shared by none: nothing is kept past them.
      store: createReadStore({
        clickhouse,
        db: config.CLICKHOUSE_DATABASE,
        cache: createQueryCache({ ttlMs: 0, maxEntries: 16 }),
      }),
      rulesFor: async (project) => (await rules.forProjects([project])).get(project) ?? [],
      staleAfterMs: config.READ_STALE_AFTER_S * 1000,
      hot: createHotStore(redis, config.QUEUE_PREFIX, {
        maxSeriesPerProject: config.READ_HOT_MAX_SERIES_PER_PROJECT,
        ttlMs: config.READ_HOT_SERIES_TTL_S * 1000,
      }),
      declarations: createDeclarationsReader(redis, config.QUEUE_PREFIX),
    };
    for (let i = 0; i < projects.length; i += PROJECTS_AT_ONCE) {
      await Promise.all(
        projects.slice(i, i + PROJECTS_AT_ONCE).map(async (project_id) => {
          try {
            const answer = await readHeadroom(deps, { projectId: project_id }, { group: "app" });
            for (const s of answer.series ?? [])
              views.set(statsSeriesKey({ project_id, ...s, model: s.model ?? "" }), s);
          } catch (err) {
            notes.push(`no hot copy of ${project_id} (${messageOf(err)})`);
          }
        }),
      );
    }
  } finally {
    await closeRedis(redis);
  }
  return { views, notes };
}

/** A series' identity in stats' rows: its model '' when the client could not see it. */
interface SeriesId {
  project_id: string;
  provider: string;
  model: string;
  app: string;
}

/** A series' newest contract figures in ClickHouse (latest_limits_v), as text. */
export interface ChSeriesRow extends SeriesId {
  seen: string;
  requests_remaining: string | null;
  requests_limit: string | null;
  tokens_remaining: string | null;
  tokens_limit: string | null;
  credits_remaining: string | null;
  /** When the requests' and tokens' windows reset, from their report (UTC text), or null. */
  requests_resets_at: string | null;
  tokens_resets_at: string | null;
}

/** A window's newest figures in ClickHouse (report_windows_minute: its newest minute's). */
export interface ChWindowRow extends SeriesId {
  dimension: string;
  window: string;
  limit: number | null;
  remaining: number | null;
  seen: string;
  /** When the window resets, as its newest report in the period said (UTC text), or null. */
  resets_at: string | null;
  reset: boolean;
}

/** Which window a headline requests or tokens is, when the contract's fields said nothing. */
export interface StatsHeadline {
  source: WindowFiguresSource;
  dimension: string;
  window: string | null;
}

/** Where a row's figures come from: the hot copy as /headroom reads it, or ClickHouse alone. */
type FiguresFrom = "hot" | "clickhouse";

export interface StatsWindow extends ChWindowRow {
  used_pct: number | null;
  source: WindowFiguresSource;
  /** How a counted window resets; null for the others. */
  resets: ResetKind | null;
  learned_from: { report_id: string; at: string } | null;
  from: FiguresFrom;
}

export interface StatsSeries extends ChSeriesRow {
  requests_reset: boolean;
  tokens_reset: boolean;
  requests_from: StatsHeadline | null;
  tokens_from: StatsHeadline | null;
  from: FiguresFrom;
}

/** An ISO time as ClickHouse's UTC text ("2026-01-31 12:00:05.000"), as stats' other times. */
const chText = (iso: string | null) => (iso === null ? null : iso.slice(0, 23).replace("T", " "));
const text = (n: number | null) => (n === null ? null : String(n));

const usedPct = (limit: number | null, remaining: number | null) =>
  limit === null || remaining === null || limit <= 0
    ? null
    : Math.round(Math.max(0, (limit - remaining) / limit) * 10_000) / 100;

const headlineOf = (m: SeriesView["requests"]): StatsHeadline | null =>
  m.source === undefined
    ? null
    : { source: m.source, dimension: m.dimension ?? "", window: m.window ?? null };

const order = (a: SeriesId, b: SeriesId) => {
  for (const k of ["project_id", "provider", "model", "app"] as const)
    if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
};

/**
 * Stats' rows with /headroom's figures where the hot copy has the series (seen since `since`,
 * Unix ms), ClickHouse's elsewhere; windows by series, each series' in its own order.
 */
export function withHot(
  ch: {
    windows: ChWindowRow[];
    series: (ChSeriesRow & { requests_reset: boolean; tokens_reset: boolean })[];
  },
  views: Map<string, SeriesView>,
  since: number,
): { windows: StatsWindow[]; series: StatsSeries[] } {
  const hot = new Map<string, { id: SeriesId; view: SeriesView }>();
  for (const [key, view] of views) {
    if (!(Date.parse(view.last_seen) >= since)) continue;
    const [project_id, provider, model, app] = JSON.parse(key) as string[];
    hot.set(key, { id: { project_id, provider, model, app } as SeriesId, view });
  }
  const windows: StatsWindow[] = ch.windows
    .filter((w) => !hot.has(statsSeriesKey(w)))
    .map((w) => ({
      ...w,
      used_pct: usedPct(w.limit, w.remaining),
      source: "stated",
      resets: null,
      learned_from: null,
      from: "clickhouse",
    }));
  for (const { id, view } of hot.values())
    for (const w of view.windows)
      windows.push({
        ...id,
        dimension: w.dimension,
        window: w.window ?? "",
        limit: w.limit,
        remaining: w.remaining,
        seen: chText(w.reported_at) ?? "",
        resets_at: chText(w.resets_at),
        reset: w.reset_since_report,
        used_pct: w.used_pct,
        source: w.source,
        resets: w.resets,
        learned_from: w.learned_from,
        from: "hot",
      });
  windows.sort(order);
  const series: StatsSeries[] = ch.series.map((r) => {
    const view = hot.get(statsSeriesKey(r))?.view;
    if (!view) return { ...r, requests_from: null, tokens_from: null, from: "clickhouse" };
    const { requests, tokens } = view;
    return {
      ...r,
      requests_remaining: text(requests.remaining),
      requests_limit: text(requests.limit),
      tokens_remaining: text(tokens.remaining),
      tokens_limit: text(tokens.limit),
      credits_remaining: text(view.credits.remaining),
      requests_resets_at: chText(requests.resets_at),
      tokens_resets_at: chText(tokens.resets_at),
      requests_reset: requests.reset_since_report,
      tokens_reset: tokens.reset_since_report,
      requests_from: headlineOf(requests),
      tokens_from: headlineOf(tokens),
      from: "hot",
    };
  });
  return { windows, series };
}
