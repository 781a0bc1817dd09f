import { createClickHouse } from "../clickhouse/client.js";
import { PROVIDER_HINTS_SUM } from "../clickhouse/provider-hints.js";
import { parseSince } from "./arg-parsers.js";
import { cliConfig, print, table } from "./context.js";

// `headroom stats`: reports and provider hints per provider/model/app over a period, and the
// current headroom, per window and as the contract's figures.

interface VolumeRow {
  project_id: string;
  provider: string;
  model: string;
  app: string;
  reports: string;
  hints: string;
  cost: string;
}

interface HeadroomRow {
  project_id: string;
  provider: string;
  model: string;
  app: string;
  seen: string;
  requests_remaining: string | null;
  requests_limit: string | null;
  tokens_remaining: string | null;
  tokens_limit: string | null;
  credits_remaining: string | null;
}

/** A window's newest figures in the period (report_windows_minute: its newest minute's). */
interface WindowRow {
  project_id: string;
  provider: string;
  model: string;
  app: string;
  dimension: string;
  window: string;
  limit: number | null;
  remaining: number | null;
  seen: string;
}

const used = (remaining: number | null, limit: number | null) =>
  remaining === null || limit === null || limit <= 0
    ? remaining === null
      ? null
      : `${remaining} left`
    : `${remaining}/${limit} (${Math.round(Math.max(0, (limit - remaining) / limit) * 1000) / 10}% used)`;

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

const pct = (remaining: string | null, limit: string | null) =>
  remaining === null || limit === null || Number(limit) === 0
    ? null
    : `${remaining}/${limit} (${Math.round((Number(remaining) / Number(limit)) * 100)}%)`;

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
            toString(credits_remaining) AS credits_remaining
          FROM ${db}.latest_limits_v
          WHERE last_seen >= now() - toIntervalSecond({seconds:UInt32}) ${where}
          ORDER BY project_id, provider, model, app`,
        query_params: params,
        format: "JSONEachRow",
      })
    ).json<HeadroomRow>();
    const windows = await (
      await client.query({
        query: windowsSql(db, where),
        query_params: params,
        format: "JSONEachRow",
      })
    ).json<WindowRow>();
    print(values.json, { since: values.since, volume, headroom, windows }, () =>
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
        "Current headroom per window (the newest minute's figures):",
        windows.length === 0
          ? "  (none)"
          : table(
              ["PROJECT", "PROVIDER", "MODEL", "APP", "DIMENSION", "WINDOW", "LEFT", "LAST SEEN"],
              windows.map((r) => [
                r.project_id,
                r.provider,
                r.model || "-",
                r.app,
                r.dimension,
                r.window || "-",
                used(r.remaining, r.limit),
                r.seen,
              ]),
            ),
        "",
        "Current headroom (latest requests, tokens and credits figures):",
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
                "LAST SEEN",
              ],
              headroom.map((r) => [
                r.project_id,
                r.provider,
                r.model || "-",
                r.app,
                pct(r.requests_remaining, r.requests_limit),
                pct(r.tokens_remaining, r.tokens_limit),
                r.credits_remaining,
                r.seen,
              ]),
            ),
      ].join("\n"),
    );
  } finally {
    await client.close();
  }
}
