import { createClickHouse } from "../clickhouse/client.js";
import { parseSince } from "./arg-parsers.js";
import { cliConfig, print, table } from "./context.js";

// `headroom stats`: reports per provider/model/app over a period, and the current headroom.

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
        query: `SELECT project_id, provider, model, app, sum(reports) AS reports, sum(provider_hints) AS hints,
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
    print(values.json, { since: values.since, volume, headroom }, () =>
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
        "Current headroom (latest figures):",
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
