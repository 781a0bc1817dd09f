import { createClickHouse } from "../clickhouse/client.js";
import { PROVIDER_HINTS_SUM } from "../clickhouse/provider-hints.js";
import { parseSince } from "./arg-parsers.js";
import { cliConfig, print, table } from "./context.js";
import {
  type ChSeriesRow,
  type ChWindowRow,
  hotViews,
  type StatsHeadline,
  type StatsWindow,
  statsSeriesKey,
  withHot,
} from "./stats-hot.js";

// `headroom stats`: reports and provider hints per provider/model/app over a period, and the
// current headroom, per window and as the headline requests and tokens, as /api/v1/headroom and
// the page show it (stats-hot.ts: counted, learned and declared windows, each with its source;
// ClickHouse's newest figures for a series Redis has no hot copy of): a window past its reset
// time with no report since is marked reset (its old figure kept, said as old), and each series'
// windows stand beside its requests and tokens, worst first.

interface VolumeRow {
  project_id: string;
  provider: string;
  model: string;
  app: string;
  reports: string;
  hints: string;
  cost: string;
}

/** A window's reset time, per series and window: the newest report's in the period. */
interface ResetRow {
  project_id: string;
  provider: string;
  model: string;
  app: string;
  dimension: string;
  window: string;
  resets_at: string | null;
}

/** "48/60 (20% used)", "40 left", "limit 60"; a source other than stated said in the brackets. */
const used = (remaining: number | null, limit: number | null, source = "stated") => {
  const said = source === "stated" ? "" : source;
  if (remaining !== null && limit !== null && limit > 0)
    return `${remaining}/${limit} (${Math.round(Math.max(0, (limit - remaining) / limit) * 1000) / 10}% used${said ? `, ${said}` : ""})`;
  const figure =
    remaining !== null ? `${remaining} left` : limit !== null ? `limit ${limit}` : null;
  return figure === null || !said ? figure : `${figure} (${said})`;
};

// Every window a provider stated (from the contract's fields, its headers or its error body), so
// that a series whose figures came only from headers (Anthropic's) or a 429 body (Gemini's) has
// its current headroom: per window, the figures of the newest minute that carried it (its
// highest limit and lowest remaining there). A tuple keeps a null remaining the newest minute's.
const windowsSql = (db: string, where: string) => `SELECT project_id, provider, model, app,
    dimension, \`window\`, f.1 AS limit, f.2 AS remaining, toString(seen_at) AS seen
  FROM (
    SELECT project_id, provider, model, app, dimension, \`window\`,
      argMax(tuple(l, r), bucket) AS f, max(bucket) AS seen_at
    FROM (
      SELECT project_id, provider, model, app, bucket, dimension, \`window\`,
        max(limit_max) AS l, min(remaining_min) AS r
      FROM ${db}.report_windows_minute
      WHERE bucket >= now() - toIntervalSecond({seconds:UInt32}) ${where}
      GROUP BY project_id, provider, model, app, bucket, dimension, \`window\`
    )
    GROUP BY project_id, provider, model, app, dimension, \`window\`
  )
  ORDER BY project_id, provider, model, app, dimension, \`window\``;

// The reset time each window's newest report in the period stated (the rollups keep none). A
// tuple keeps a null reset the newest report's.
const resetsSql = (db: string, where: string) => `SELECT project_id, provider, model, app,
    dimension, \`window\`, if(isNull(r.1), NULL, toString(r.1)) AS resets_at
  FROM (
    SELECT project_id, provider, model, app, w.dimension AS dimension,
      ifNull(w.window, '') AS \`window\`, argMax(tuple(w.resets_at), timestamp) AS r
    FROM ${db}.reports ARRAY JOIN windows AS w
    WHERE timestamp >= now() - toIntervalSecond({seconds:UInt32}) ${where}
    GROUP BY project_id, provider, model, app, dimension, \`window\`
  )`;

/** "48/60 (80%)": what is left; a headline from a window says which and its source. */
const pct = (remaining: string | null, limit: string | null, from: StatsHeadline | null = null) => {
  const said = from
    ? `${from.source} ${from.dimension}${from.window ? ` ${from.window}` : ""}`
    : "";
  if (remaining === null || limit === null || Number(limit) === 0)
    return remaining === null || !from ? null : `${remaining} left (${said})`;
  const share = `${Math.round((Number(remaining) / Number(limit)) * 100)}%`;
  return `${remaining}/${limit} (${said ? `${share}, ${said}` : share})`;
};

/** ClickHouse's "2026-01-31 12:00:05.000" (UTC) as Unix ms. */
const utcMs = (text: string) => Date.parse(`${text.replace(" ", "T")}Z`);

/** Past its reset time: the figures are the previous window's, with no report since. */
export const hasReset = (resetsAt: string | null, now: number) =>
  resetsAt !== null && utcMs(resetsAt) <= now;

/** "RESET at 12:00:05, no report since (was 97.7% used)" for a reset window, else `figures`. */
export function markReset(figures: string | null, resetsAt: string | null, now: number) {
  if (!hasReset(resetsAt, now)) return figures;
  const at = (resetsAt ?? "").slice(11, 19);
  return `RESET at ${at}, no report since${figures === null ? "" : ` (was ${figures})`}`;
}

/** "in 7m38s", or "-" when no reset time was stated. */
function resetsIn(resetsAt: string | null, now: number): string {
  if (resetsAt === null) return "-";
  const s = Math.max(0, Math.round((utcMs(resetsAt) - now) / 1000));
  const m = Math.floor(s / 60);
  return m > 0 ? `in ${m}m${s % 60}s` : `in ${s}s`;
}

const usedOf = (w: Pick<ChWindowRow, "limit" | "remaining">) =>
  w.limit === null || w.remaining === null || w.limit <= 0 ? -1 : (w.limit - w.remaining) / w.limit;

/** A series' windows in a line, worst first, reset ones last: "requests 1d 332/14400 (97.7% used); …". */
export function windowsLine(windows: StatsWindow[], now: number): string {
  if (windows.length === 0) return "-";
  const rank = (w: StatsWindow) => (w.reset ? -2 : usedOf(w));
  return [...windows]
    .sort((a, b) => rank(b) - rank(a))
    .map(
      (w) =>
        `${w.dimension}${w.window ? ` ${w.window}` : ""} ${markReset(used(w.remaining, w.limit, w.source), w.resets_at, now) ?? "-"}`,
    )
    .join("; ");
}

export interface StatsOptions {
  project?: string;
  /** Checked by program.ts: `30m`, `24h`, `7d`. */
  since: string;
  json: boolean;
}

export async function statsCommand(values: StatsOptions): Promise<void> {
  const seconds = parseSince(values.since);
  const config = cliConfig();
  const db = config.CLICKHOUSE_DATABASE;
  const client = createClickHouse(config);
  const where = values.project ? "AND project_id = {project:String}" : "";
  const params = { seconds, project: values.project ?? "" };
  try {
    const volume = await (
      await client.query({
        query: `SELECT project_id, provider, model, app, sum(reports) AS reports, ${PROVIDER_HINTS_SUM} AS hints,
            toString(sum(cost_sum)) AS cost
          FROM ${db}.reports_minute
          WHERE bucket >= now() - toIntervalSecond({seconds:UInt32}) ${where}
          GROUP BY project_id, provider, model, app ORDER BY reports DESC, provider, model, app`,
        query_params: params,
        format: "JSONEachRow",
      })
    ).json<VolumeRow>();
    const headroom = await (
      await client.query({
        query: `SELECT project_id, provider, model, app, toString(last_seen) AS seen,
            requests_remaining, requests_limit, tokens_remaining, tokens_limit,
            toString(credits_remaining) AS credits_remaining,
            if(isNull(reset_requests_ms), NULL,
              toString(limits_at + toIntervalMillisecond(reset_requests_ms))) AS requests_resets_at,
            if(isNull(reset_tokens_ms), NULL,
              toString(limits_at + toIntervalMillisecond(reset_tokens_ms))) AS tokens_resets_at
          FROM ${db}.latest_limits_v
          WHERE last_seen >= now() - toIntervalSecond({seconds:UInt32}) ${where}
          ORDER BY project_id, provider, model, app`,
        query_params: params,
        format: "JSONEachRow",
      })
    ).json<ChSeriesRow>();
    const figures = await (
      await client.query({
        query: windowsSql(db, where),
        query_params: params,
        format: "JSONEachRow",
      })
    ).json<Omit<ChWindowRow, "resets_at" | "reset">>();
    const resets = await (
      await client.query({
        query: resetsSql(db, where),
        query_params: params,
        format: "JSONEachRow",
      })
    ).json<ResetRow>();
    const keyOf = (r: Omit<ResetRow, "resets_at">) =>
      JSON.stringify([r.project_id, r.provider, r.model, r.app, r.dimension, r.window]);
    const resetOf = new Map(resets.map((r) => [keyOf(r), r.resets_at]));
    const now = Date.now();
    const chWindows: ChWindowRow[] = figures.map((w) => {
      const resets_at = resetOf.get(keyOf(w)) ?? null;
      return { ...w, resets_at, reset: hasReset(resets_at, now) };
    });
    const chSeries = headroom.map((r) => ({
      ...r,
      requests_reset: hasReset(r.requests_resets_at, now),
      tokens_reset: hasReset(r.tokens_resets_at, now),
    }));
    // /headroom's view of every project that had reports in the period.
    const projects = values.project
      ? [values.project]
      : [...new Set([...volume, ...headroom].map((r) => r.project_id))].sort();
    const hot = await hotViews(config, client, projects);
    for (const note of hot.notes)
      process.stderr.write(`headroom stats: ${note}: ClickHouse's figures shown\n`);
    const { windows, series } = withHot(
      { windows: chWindows, series: chSeries },
      hot.views,
      now - seconds * 1000,
    );
    const windowsOf = new Map<string, StatsWindow[]>();
    for (const w of windows)
      windowsOf.set(statsSeriesKey(w), [...(windowsOf.get(statsSeriesKey(w)) ?? []), w]);
    print(values.json, { since: values.since, volume, headroom: series, windows }, () =>
      [
        `Reports in the last ${values.since}:`,
        volume.length === 0
          ? "  (none)"
          : table(
              ["PROJECT", "PROVIDER", "MODEL", "APP", "REPORTS", "NO-LIMIT HINTS", "COST"],
              volume.map((r) => [
                r.project_id,
                r.provider,
                r.model || "-",
                r.app,
                r.reports,
                r.hints,
                r.cost,
              ]),
            ),
        "",
        "Current headroom per window (as /api/v1/headroom has it; a series with no hot copy in Redis: ClickHouse's newest minute):",
        windows.length === 0
          ? "  (none)"
          : table(
              [
                "PROJECT",
                "PROVIDER",
                "MODEL",
                "APP",
                "DIMENSION",
                "WINDOW",
                "LEFT",
                "SOURCE",
                "RESETS",
                "LAST SEEN",
              ],
              windows.map((r) => [
                r.project_id,
                r.provider,
                r.model || "-",
                r.app,
                r.dimension,
                r.window || "-",
                markReset(used(r.remaining, r.limit), r.resets_at, now),
                r.source,
                r.reset ? "reset" : resetsIn(r.resets_at, now),
                r.seen,
              ]),
            ),
        "",
        "Current headroom (latest requests, tokens and credits figures, and the windows):",
        headroom.length === 0
          ? "  (none)"
          : table(
              [
                "PROJECT",
                "PROVIDER",
                "MODEL",
                "APP",
                "REQUESTS LEFT",
                "TOKENS LEFT",
                "CREDITS LEFT",
                "WINDOWS (WORST FIRST)",
                "LAST SEEN",
              ],
              series.map((r) => [
                r.project_id,
                r.provider,
                r.model || "-",
                r.app,
                markReset(
                  pct(r.requests_remaining, r.requests_limit, r.requests_from),
                  r.requests_resets_at,
                  now,
                ),
                markReset(
                  pct(r.tokens_remaining, r.tokens_limit, r.tokens_from),
                  r.tokens_resets_at,
                  now,
                ),
                r.credits_remaining,
                windowsLine(windowsOf.get(statsSeriesKey(r)) ?? [], now),
                r.seen,
              ]),
            ),
      ].join("\n"),
    );
  } finally {
    await client.close();
  }
}
