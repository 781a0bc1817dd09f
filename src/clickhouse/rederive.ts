import type { ClickHouseClient } from "@clickhouse/client";
import type { ReportRow } from "../report/report-schema.js";
import { onCluster, stored } from "./cluster-ddl.js";
import type { MigrationContext } from "./migration-context.js";
import { WINDOW_ROLLUPS, windowRollupSelect } from "./migrations.js";
import { distributedInsertSettings } from "./report-sink.js";
import { type Derive, type WindowCells, windowCellsOf } from "./report-windows.js";

// `headroom rederive-windows`: the current parsers applied again to stored reports' kept headers
// and error bodies, their windows rewritten where they changed.
//
// Exactly once in every view: the windows are rewritten in place, by a mutation (ALTER TABLE …
// UPDATE) of `reports`, never by inserting a report again. A mutation fires no materialized view,
// so the rollups and latest_limits, which count each insert, see nothing; `reports_v` (FINAL)
// still holds one row per report, now with the new windows. The windows' rollups (migration 9)
// hold figures of the old windows: the days of the changed reports are made again there, from
// `reports` (their rows deleted, then inserted from the reports of those days). A report whose windows come out the
// same is left alone, so a second run rewrites nothing. The new values travel as query
// parameters (no SQL is built from a report's text), one mutation per chunk of reports, waited
// for (mutations_sync = 2: every replica).

/** Columns read to derive a report's windows again, in the order windowCellsOf reads them. */
const SOURCE = [
  "report_id",
  "project_id",
  "provider",
  "timestamp",
  "requests_limit",
  "requests_remaining",
  "tokens_limit",
  "tokens_remaining",
  "reset_requests_ms",
  "reset_tokens_ms",
  "credits_limit",
  "credits_remaining",
  "headers",
  "error",
] as const;

export interface RederiveOptions {
  project?: string;
  /** Only reports whose timestamp is at or after this (Unix ms). */
  sinceMs?: number;
  /** Only reports whose stored windows were made by this parser (e.g. `anthropic@1`). */
  parser?: string;
  /** Count what would change, change nothing. */
  dryRun?: boolean;
  /** Reports read per page, and rewritten per mutation. */
  chunk?: number;
  /** The parsers to apply: this release's, unless a test gives others. */
  derive?: Derive;
}

export interface RederiveResult {
  /** Reports read (in scope). */
  read: number;
  /** Reports whose windows changed (rewritten, unless dryRun). */
  changed: number;
  /** Mutations run. */
  mutations: number;
}

export async function rederiveWindows(
  client: ClickHouseClient,
  ctx: MigrationContext,
  opts: RederiveOptions = {},
): Promise<RederiveResult> {
  const chunk = opts.chunk ?? 500;
  const cellsOf = windowCellsOf(SOURCE, opts.derive);
  const where: string[] = [];
  const params: Record<string, unknown> = { limit: chunk };
  if (opts.project !== undefined) {
    where.push("project_id = {project:String}");
    params.project = opts.project;
  }
  if (opts.sinceMs !== undefined) {
    where.push("timestamp >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')");
    params.since = opts.sinceMs;
  }
  if (opts.parser !== undefined) {
    where.push("windows_parser = {parser:String}");
    params.parser = opts.parser;
  }
  const result: RederiveResult = { read: 0, changed: 0, mutations: 0 };
  // Keyset pages by report id: a mutation between pages moves no report across the cursor.
  let after = "00000000-0000-0000-0000-000000000000";
  for (;;) {
    const rs = await client.query({
      query: `SELECT ${SOURCE.map((c) => `${c}`).join(", ")},
          \`windows.dimension\`, \`windows.window\`, \`windows.limit\`, \`windows.remaining\`,
          \`windows.resets_at\`, windows_parser
        FROM ${ctx.db}.reports FINAL
        WHERE report_id > {after:UUID}${where.map((w) => ` AND ${w}`).join("")}
        ORDER BY report_id LIMIT {limit:UInt32}`,
      query_params: { ...params, after },
      format: "JSONCompactEachRow",
      // Decimals and Int64 as JSON numbers, as the sink's rows carry them.
      clickhouse_settings: {
        output_format_json_quote_64bit_integers: 0,
        output_format_json_quote_decimals: 0,
      },
    });
    const rows = await rs.json<unknown[]>();
    if (rows.length === 0) break;
    result.read += rows.length;
    after = String((rows[rows.length - 1] as unknown[])[0]);
    const changed: Changed[] = [];
    for (const row of rows) {
      const source = row.slice(0, SOURCE.length) as ReportRow;
      const now = row.slice(SOURCE.length) as WindowCells;
      const cells = cellsOf(source);
      if (JSON.stringify(cells) !== JSON.stringify(now))
        changed.push({
          id: String(source[0]),
          project: String(source[1]),
          day: String(source[3]).slice(0, 10),
          cells,
        });
    }
    result.changed += changed.length;
    if (changed.length > 0 && !opts.dryRun) {
      await rewrite(client, ctx, changed);
      await rebuildWindowRollups(client, ctx, changed);
      result.mutations++;
    }
    if (rows.length < chunk) break;
  }
  return result;
}

interface Changed {
  id: string;
  project: string;
  /** The report's day (its timestamp's, YYYY-MM-DD): what its windows' rollups bucket by. */
  day: string;
  cells: WindowCells;
}

/** The windows' rollups of the changed reports' projects and days, made again from `reports`. */
async function rebuildWindowRollups(
  client: ClickHouseClient,
  ctx: MigrationContext,
  changed: Changed[],
): Promise<void> {
  const query_params = {
    projects: [...new Set(changed.map((c) => c.project))],
    days: [...new Set(changed.map((c) => c.day))],
  };
  for (const { name, bucket } of WINDOW_ROLLUPS) {
    await client.command({
      query: `ALTER TABLE ${stored(ctx, name)}${onCluster(ctx)} DELETE
        WHERE project_id IN {projects:Array(String)} AND toDate(bucket) IN {days:Array(Date)}`,
      query_params,
      clickhouse_settings: { mutations_sync: "2" },
    });
    // Through the front tables on a cluster: every shard's reports, into every shard's rollup.
    await client.command({
      query: `INSERT INTO ${ctx.db}.${name} ${windowRollupSelect(
        bucket,
        `${ctx.db}.reports`,
        " WHERE project_id IN {projects:Array(String)} AND toDate(timestamp) IN {days:Array(Date)}",
      )}`,
      query_params,
      clickhouse_settings: distributedInsertSettings(ctx.cluster),
    });
  }
}

async function rewrite(
  client: ClickHouseClient,
  ctx: MigrationContext,
  changed: Changed[],
): Promise<void> {
  const column = (k: number) => changed.map((c) => c.cells[k]);
  // Each column's new value: the report's own, looked up by its place in {ids}.
  const pick = (name: string) => `{${name}}[indexOf({ids:Array(UUID)}, report_id)]`;
  await client.command({
    query: `ALTER TABLE ${stored(ctx, "reports")}${onCluster(ctx)} UPDATE
        \`windows.dimension\` = ${pick("dimension:Array(Array(String))")},
        \`windows.window\` = ${pick("window:Array(Array(Nullable(String)))")},
        \`windows.limit\` = ${pick("limit:Array(Array(Nullable(Float64)))")},
        \`windows.remaining\` = ${pick("remaining:Array(Array(Nullable(Float64)))")},
        \`windows.resets_at\` = arrayMap(t -> toDateTime64OrNull(t, 3, 'UTC'), ${pick("resets_at:Array(Array(Nullable(String)))")}),
        windows_parser = ${pick("parser:Array(String)")}
      WHERE project_id IN {projects:Array(String)} AND report_id IN {ids:Array(UUID)}`,
    query_params: {
      ids: changed.map((c) => c.id),
      projects: [...new Set(changed.map((c) => c.project))],
      dimension: column(0),
      window: column(1),
      limit: column(2),
      remaining: column(3),
      resets_at: column(4),
      parser: column(5),
    },
    clickhouse_settings: { mutations_sync: "2" },
  });
}
