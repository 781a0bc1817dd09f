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
// parameters (no SQL is built from a report's text), waited for (mutations_sync = 2: every
// replica).
//
// A report is known by the table's whole sort key and its receive time (the partition's key: rows
// of one sort key in two months' partitions are two rows), never by its id alone: a client's id
// is reused after the edge's 24 h deduplication window, so two stored reports may share one.
// Pages follow that key (keyset), and a mutation picks each report's values by it (KEY_SQL). The
// parameters travel in the URL, which ClickHouse takes up to 1 MiB (http_max_uri_size): a page's
// changes are split into mutations of at most MAX_PARAM_BYTES of parameters each.

/** A report's identity: its sort key and receive time, as one text (names hex: no separator in them). */
const KEY_SQL =
  "concat(toString(report_id), '|', toString(timestamp), '|', toString(received_at), '|', hex(project_id), '|', hex(provider), '|', hex(model), '|', hex(app))";

/** The sort key of `reports`, in its order, then the receive time: what pages follow. */
const PAGE_KEY = "(project_id, provider, model, app, timestamp, report_id, received_at)";

/** Parameters of one mutation, as JSON bytes: well under the URL's 1 MiB once URL-encoded. */
export const MAX_PARAM_BYTES = 256 * 1024;

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
  // Keyset pages by PAGE_KEY: unique in `reports FINAL` (reports sharing an id differ in it), and
  // a mutation between pages moves no report across the cursor.
  let after: unknown[] | null = null;
  for (;;) {
    const cursor: string[] =
      after === null
        ? []
        : [
            `${PAGE_KEY} > ({a0:String}, {a1:String}, {a2:String}, {a3:String}, toDateTime64({a4:String}, 3, 'UTC'), {a5:UUID}, toDateTime64({a6:String}, 3, 'UTC'))`,
          ];
    const rs = await client.query({
      query: `SELECT ${SOURCE.map((c) => `${c}`).join(", ")},
          \`windows.dimension\`, \`windows.window\`, \`windows.limit\`, \`windows.remaining\`,
          \`windows.resets_at\`, windows_parser,
          ${KEY_SQL} AS key, project_id, provider, model, app, toString(timestamp), report_id,
          toString(received_at)
        FROM ${ctx.db}.reports FINAL
        ${[...cursor, ...where].map((w, i) => `${i === 0 ? "WHERE" : "AND"} ${w}`).join(" ")}
        ORDER BY ${PAGE_KEY.slice(1, -1)} LIMIT {limit:UInt32}`,
      query_params: {
        ...params,
        ...(after === null ? {} : Object.fromEntries(after.map((v, i) => [`a${i}`, v]))),
      },
      format: "JSONCompactEachRow",
      // Decimals and Int64 as JSON numbers, as the sink's rows carry them.
      clickhouse_settings: {
        output_format_json_quote_64bit_integers: 0,
        output_format_json_quote_decimals: 0,
      },
    });
    const rows: unknown[][] = await rs.json<unknown[]>();
    if (rows.length === 0) break;
    result.read += rows.length;
    const windowsEnd = SOURCE.length + WINDOW_CELLS;
    after = (rows[rows.length - 1] as unknown[]).slice(windowsEnd + 1);
    const changed: Changed[] = [];
    for (const row of rows) {
      const source = row.slice(0, SOURCE.length) as ReportRow;
      const now = row.slice(SOURCE.length, windowsEnd) as WindowCells;
      const cells = cellsOf(source);
      if (JSON.stringify(cells) !== JSON.stringify(now))
        changed.push({
          key: String(row[windowsEnd]),
          id: String(source[0]),
          project: String(source[1]),
          day: String(source[3]).slice(0, 10),
          cells,
        });
    }
    result.changed += changed.length;
    if (changed.length > 0 && !opts.dryRun) {
      for (const part of byParamBytes(changed)) {
        await rewrite(client, ctx, part);
        await rebuildWindowRollups(client, ctx, part);
        result.mutations++;
      }
    }
    if (rows.length < chunk) break;
  }
  return result;
}

/** The windows' cells a page reads after SOURCE (WINDOW_COLUMNS). */
const WINDOW_CELLS = 6;

/** Changes cut into runs whose parameters stay under MAX_PARAM_BYTES (one report at least each). */
export function byParamBytes<T extends { key: string; cells: WindowCells }>(changed: T[]): T[][] {
  const parts: T[][] = [];
  let part: T[] = [];
  let bytes = 0;
  for (const c of changed) {
    // The key thrice (ids, keys, a project), its cells, and room for the separators.
    const size = Buffer.byteLength(JSON.stringify(c.cells)) + 3 * Buffer.byteLength(c.key) + 64;
    if (part.length > 0 && bytes + size > MAX_PARAM_BYTES) {
      parts.push(part);
      part = [];
      bytes = 0;
    }
    part.push(c);
    bytes += size;
  }
  if (part.length > 0) parts.push(part);
  return parts;
}

interface Changed {
  /** The report's sort key as KEY_SQL writes it: its identity. */
  key: string;
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
  // Each column's new value: the report's own, looked up by its key's place in {keys}.
  const pick = (name: string) => `{${name}}[indexOf({keys:Array(String)}, ${KEY_SQL})]`;
  await client.command({
    query: `ALTER TABLE ${stored(ctx, "reports")}${onCluster(ctx)} UPDATE
        \`windows.dimension\` = ${pick("dimension:Array(Array(String))")},
        \`windows.window\` = ${pick("window:Array(Array(Nullable(String)))")},
        \`windows.limit\` = ${pick("limit:Array(Array(Nullable(Float64)))")},
        \`windows.remaining\` = ${pick("remaining:Array(Array(Nullable(Float64)))")},
        \`windows.resets_at\` = arrayMap(t -> toDateTime64OrNull(t, 3, 'UTC'), ${pick("resets_at:Array(Array(Nullable(String)))")}),
        windows_parser = ${pick("parser:Array(String)")}
      WHERE project_id IN {projects:Array(String)} AND report_id IN {ids:Array(UUID)}
        AND has({keys:Array(String)}, ${KEY_SQL})`,
    query_params: {
      ids: [...new Set(changed.map((c) => c.id))],
      keys: changed.map((c) => c.key),
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
