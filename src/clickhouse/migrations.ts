import type { ClickHouseClient } from "@clickhouse/client";
import { dedupWindow, distributedFront, engine, onCluster, stored } from "./cluster-ddl.js";
import { type Migration, runMigrations } from "./migrate.js";
import type { MigrationContext } from "./migration-context.js";
import { COUNTED_COLUMNS, IS_COUNTED } from "./counted-reports.js";
import {
  IS_PROVIDER_HINT,
  IS_PROVIDER_HINT_2,
  PROVIDER_HINTS_COLUMN,
  PROVIDER_HINTS_COLUMN_2,
} from "./provider-hints.js";

export type { Migration } from "./migrate.js";
export { type MigrationContext, migrationContext } from "./migration-context.js";

// Versioned schema migrations, tracked in `schema_migrations`. Every statement is idempotent
// (IF NOT EXISTS), so concurrent runs, or a migration interrupted half way, are harmless: running
// again finishes the job. With a cluster (CLICKHOUSE_CLUSTER) the same statements create
// replicated tables behind Distributed ones; what differs is in cluster-ddl.ts.
//
// A migration is frozen once released: a database that applied it never runs it again, so its
// text must never change (test/unit/migrations.frozen.test.ts holds each one's hash). Nothing in
// a migration may read the live report schema; a new report field is a new migration (ADD
// COLUMN) and a new row shape (src/report/row-shapes.ts).

// Every insert of a batch repeats its first (same rows, same token: see manifest-store.ts);
// MergeTree tables drop a repeat only within a window of their latest inserts, and so do the
// tables materialized views write to. A worker frozen mid-insert, or a job redelivered late,
// must still fall inside it: 100,000 inserts is hours at the rates a worker inserts at.
const DEDUP_WINDOW = 100_000;
const dedup = (ctx: MigrationContext) => dedupWindow(ctx, DEDUP_WINDOW);
const DEDUP_TABLES = [
  "reports",
  "reports_minute",
  "reports_daily",
  "latest_limits",
  "alert_events",
];

const HAS_LIMITS =
  "(requests_limit IS NOT NULL OR requests_remaining IS NOT NULL OR tokens_limit IS NOT NULL OR tokens_remaining IS NOT NULL)";
const HAS_CREDITS =
  "(credits_limit IS NOT NULL OR credits_remaining IS NOT NULL OR request_cost IS NOT NULL)";
/** A provider hint: a report with no requests, tokens or credits figures (the README's word). */
const IS_HINT = `(NOT ${HAS_LIMITS} AND NOT ${HAS_CREDITS})`;
const LIMITS_TUPLE =
  "Tuple(requests_limit Nullable(Int64), requests_remaining Nullable(Int64), tokens_limit Nullable(Int64), tokens_remaining Nullable(Int64), reset_requests_ms Nullable(Int64), reset_tokens_ms Nullable(Int64))";
const CREDITS_TUPLE =
  "Tuple(credits_limit Nullable(Decimal(38, 12)), credits_remaining Nullable(Decimal(38, 12)), request_cost Nullable(Decimal(38, 12)))";

const ROLLUPS = [
  { name: "reports_minute", bucket: "toStartOfMinute(timestamp)" },
  { name: "reports_daily", bucket: "toDate(timestamp)" },
];

/**
 * The rollups count provider hints as README defines them (`hints`, kept as it was, counted
 * credit-only reports too): a column of its own, and the materialized views count it from now on.
 * The backfill counts it for the reports already stored, in rows that add nothing else. The
 * analysts' `_v` views stay as they are (a view's query cannot be altered in place).
 */
function providerHints(ctx: MigrationContext, name: string, bucketExpr: string): string[] {
  const column = `ADD COLUMN IF NOT EXISTS provider_hints SimpleAggregateFunction(sum, UInt64) AFTER hints`;
  return [
    `ALTER TABLE ${stored(ctx, name)}${onCluster(ctx)} ${column}`,
    ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.${name}${onCluster(ctx)} ${column}`] : []),
    `ALTER TABLE ${ctx.db}.${name}_mv${onCluster(ctx)} MODIFY QUERY
    SELECT project_id, app, provider, model, ${bucketExpr} AS bucket,
      count() AS reports,
      countIf(NOT ${HAS_LIMITS}) AS hints,
      countIf(${IS_HINT}) AS provider_hints,
      min(requests_remaining) AS requests_remaining_min,
      min(tokens_remaining) AS tokens_remaining_min,
      max(requests_limit) AS requests_limit_max,
      max(tokens_limit) AS tokens_limit_max,
      sum(ifNull(request_cost, toDecimal128(0, 12))) AS cost_sum,
      argMaxIfState(credits_remaining, timestamp, credits_remaining IS NOT NULL) AS credits_remaining_last
    FROM ${stored(ctx, "reports")}
    GROUP BY project_id, app, provider, model, bucket`,
  ];
}

function providerHintsBackfill(ctx: MigrationContext, name: string, bucketExpr: string): string {
  return `INSERT INTO ${stored(ctx, name)} (project_id, app, provider, model, bucket, reports, hints,
      provider_hints, cost_sum, credits_remaining_last)
    SELECT project_id, app, provider, model, ${bucketExpr} AS bucket, 0, 0, count(),
      toDecimal128(0, 12), argMaxIfState(credits_remaining, timestamp, 0)
    FROM ${stored(ctx, "reports")} FINAL
    WHERE ${IS_HINT}
    GROUP BY project_id, app, provider, model, bucket`;
}

/**
 * Provider hints as issue 45 defines them (provider-hints.ts): no figure from limits, credits,
 * headers or error. Migration 6's `provider_hints` counted a report whose figures came only from
 * its headers or error body as a hint; that column stays as it was (the analysts' `_v` views read
 * the views' columns as they were made), and a column of its own counts hints from now on.
 */
function figurelessHints(ctx: MigrationContext, name: string, bucketExpr: string): string[] {
  const column = `ADD COLUMN IF NOT EXISTS ${PROVIDER_HINTS_COLUMN} SimpleAggregateFunction(sum, UInt64) AFTER provider_hints`;
  return [
    `ALTER TABLE ${stored(ctx, name)}${onCluster(ctx)} ${column}`,
    ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.${name}${onCluster(ctx)} ${column}`] : []),
    `ALTER TABLE ${ctx.db}.${name}_mv${onCluster(ctx)} MODIFY QUERY
    SELECT project_id, app, provider, model, ${bucketExpr} AS bucket,
      count() AS reports,
      countIf(NOT ${HAS_LIMITS}) AS hints,
      countIf(${IS_HINT}) AS provider_hints,
      countIf(${IS_PROVIDER_HINT}) AS ${PROVIDER_HINTS_COLUMN},
      min(requests_remaining) AS requests_remaining_min,
      min(tokens_remaining) AS tokens_remaining_min,
      max(requests_limit) AS requests_limit_max,
      max(tokens_limit) AS tokens_limit_max,
      sum(ifNull(request_cost, toDecimal128(0, 12))) AS cost_sum,
      argMaxIfState(credits_remaining, timestamp, credits_remaining IS NOT NULL) AS credits_remaining_last
    FROM ${stored(ctx, "reports")}
    GROUP BY project_id, app, provider, model, bucket`,
  ];
}

/** The reports stored before, counted in rows that add nothing else (as migration 6's backfill). */
function figurelessHintsBackfill(ctx: MigrationContext, name: string, bucketExpr: string): string {
  return `INSERT INTO ${stored(ctx, name)} (project_id, app, provider, model, bucket, reports, hints,
      provider_hints, ${PROVIDER_HINTS_COLUMN}, cost_sum, credits_remaining_last)
    SELECT project_id, app, provider, model, ${bucketExpr} AS bucket, 0, 0, 0, count(),
      toDecimal128(0, 12), argMaxIfState(credits_remaining, timestamp, 0)
    FROM ${stored(ctx, "reports")} FINAL
    WHERE ${IS_PROVIDER_HINT}
    GROUP BY project_id, app, provider, model, bucket`;
}

/** A rollup table and the materialized view that keeps it, per `bucket` of time. */
function rollup(ctx: MigrationContext, name: string, bucketType: string, bucketExpr: string) {
  return [
    `CREATE TABLE IF NOT EXISTS ${stored(ctx, name)}${onCluster(ctx)} (
      project_id LowCardinality(String),
      app LowCardinality(String),
      provider LowCardinality(String),
      model LowCardinality(String),
      bucket ${bucketType},
      reports SimpleAggregateFunction(sum, UInt64),
      hints SimpleAggregateFunction(sum, UInt64),
      requests_remaining_min SimpleAggregateFunction(min, Nullable(Int64)),
      tokens_remaining_min SimpleAggregateFunction(min, Nullable(Int64)),
      requests_limit_max SimpleAggregateFunction(max, Nullable(Int64)),
      tokens_limit_max SimpleAggregateFunction(max, Nullable(Int64)),
      cost_sum SimpleAggregateFunction(sum, Decimal(38, 12)),
      credits_remaining_last AggregateFunction(argMaxIf, Nullable(Decimal(38, 12)), DateTime64(3, 'UTC'), UInt8)
    ) ENGINE = ${engine(ctx, "AggregatingMergeTree", name)}
    PARTITION BY toYYYYMM(bucket)
    ORDER BY (project_id, provider, model, app, bucket)
    TTL toDateTime(bucket) + INTERVAL ${ctx.retentionDays} DAY
    SETTINGS ${dedup(ctx)}`,
    ...distributedFront(ctx, name),
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${ctx.db}.${name}_mv${onCluster(ctx)} TO ${stored(ctx, name)} AS
    SELECT project_id, app, provider, model, ${bucketExpr} AS bucket,
      count() AS reports,
      countIf(NOT ${HAS_LIMITS}) AS hints,
      min(requests_remaining) AS requests_remaining_min,
      min(tokens_remaining) AS tokens_remaining_min,
      max(requests_limit) AS requests_limit_max,
      max(tokens_limit) AS tokens_limit_max,
      sum(ifNull(request_cost, toDecimal128(0, 12))) AS cost_sum,
      argMaxIfState(credits_remaining, timestamp, credits_remaining IS NOT NULL) AS credits_remaining_last
    FROM ${stored(ctx, "reports")}
    GROUP BY project_id, app, provider, model, bucket`,
    `CREATE VIEW IF NOT EXISTS ${ctx.db}.${name}_v${onCluster(ctx)} AS
    SELECT project_id, app, provider, model, bucket,
      sum(reports) AS reports, sum(hints) AS hints,
      min(requests_remaining_min) AS requests_remaining_min,
      min(tokens_remaining_min) AS tokens_remaining_min,
      max(requests_limit_max) AS requests_limit_max,
      max(tokens_limit_max) AS tokens_limit_max,
      sum(cost_sum) AS cost_sum,
      argMaxIfMerge(credits_remaining_last) AS credits_remaining_last
    FROM ${ctx.db}.${name}
    GROUP BY project_id, app, provider, model, bucket`,
  ];
}

/**
 * The legacy windows of a report, from the contract's six limits fields and credits, in SQL: what
 * src/providers/derive-windows.ts derived as "limits@1" when this migration was written (one
 * window per dimension that has a limit or a remaining; resets relative to the timestamp; no
 * window length). The default of the windows columns: a row inserted without them (every report
 * stored before this migration, and those a worker of the previous release inserts during a
 * rolling upgrade) reads these, computed from its own figures; nothing is rewritten.
 */
function legacyWindow(values: string, type: string): string {
  const keep =
    "[requests_limit IS NOT NULL OR requests_remaining IS NOT NULL, tokens_limit IS NOT NULL OR tokens_remaining IS NOT NULL, credits_limit IS NOT NULL OR credits_remaining IS NOT NULL]";
  return `${type} DEFAULT arrayFilter((v, k) -> k, CAST(${values}, '${type.replaceAll("'", "\\'")}'), ${keep})`;
}
const NULL_TIME = "CAST(NULL, 'Nullable(DateTime64(3, \\'UTC\\'))')";
/** The windows columns of `reports`, and their legacy defaults. */
const WINDOW_COLUMNS = [
  `\`windows.dimension\` ${legacyWindow("['requests', 'tokens', 'credits']", "Array(LowCardinality(String))")}`,
  `\`windows.window\` ${legacyWindow("[NULL, NULL, NULL]", "Array(LowCardinality(Nullable(String)))")}`,
  `\`windows.limit\` ${legacyWindow("[toFloat64(requests_limit), toFloat64(tokens_limit), toFloat64(credits_limit)]", "Array(Nullable(Float64))")}`,
  `\`windows.remaining\` ${legacyWindow("[toFloat64(requests_remaining), toFloat64(tokens_remaining), toFloat64(credits_remaining)]", "Array(Nullable(Float64))")}`,
  `\`windows.resets_at\` ${legacyWindow(`[timestamp + toIntervalMillisecond(reset_requests_ms), timestamp + toIntervalMillisecond(reset_tokens_ms), ${NULL_TIME}]`, "Array(Nullable(DateTime64(3, 'UTC')))")}`,
  "windows_parser LowCardinality(String) DEFAULT 'limits@1'",
];

/**
 * What the provider said (issue 34): the kept rate-limit headers and the error body, as the
 * compact JSON text the edge made (String with ZSTD: a report's few headers compress well beside
 * its neighbours'; a Map would need the insert to re-parse the text the job carries), and the
 * windows derived from them, as a Nested of parallel arrays (ARRAY JOIN gives one row per window).
 */
function providerSaid(ctx: MigrationContext): string[] {
  const columns = [
    "ADD COLUMN IF NOT EXISTS headers Nullable(String) CODEC(ZSTD(3))",
    "ADD COLUMN IF NOT EXISTS error Nullable(String) CODEC(ZSTD(3))",
    ...WINDOW_COLUMNS.map((c) => `ADD COLUMN IF NOT EXISTS ${c}`),
  ].join(",\n      ");
  return [
    `ALTER TABLE ${stored(ctx, "reports")}${onCluster(ctx)}\n      ${columns}`,
    ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.reports${onCluster(ctx)}\n      ${columns}`] : []),
    // A view keeps the columns it was made with: reports_v is made again to show the new ones.
    `CREATE OR REPLACE VIEW ${ctx.db}.reports_v${onCluster(ctx)} AS SELECT * FROM ${ctx.db}.reports FINAL`,
    // One row per (report, window), for analysts (docs/analytics.md).
    `CREATE VIEW IF NOT EXISTS ${ctx.db}.report_windows_v${onCluster(ctx)} AS
    SELECT report_id, project_id, key_id, app, provider, model, timestamp, received_at,
      windows_parser,
      w.dimension AS dimension,
      w.window AS \`window\`,
      w.limit AS \`limit\`,
      w.remaining AS remaining,
      w.resets_at AS resets_at,
      if(w.limit > 0 AND w.remaining IS NOT NULL,
        greatest(0, least(100, 100 * (w.limit - w.remaining) / w.limit)), NULL) AS used_pct
    FROM ${ctx.db}.reports FINAL
    ARRAY JOIN windows AS w`,
  ];
}

/** The windows' rollups, by `bucket` of time as the reports' rollups (ROLLUPS). */
export const WINDOW_ROLLUPS = [
  {
    name: "report_windows_minute",
    bucketType: "DateTime('UTC')",
    bucket: "toStartOfMinute(timestamp)",
  },
  { name: "report_windows_daily", bucketType: "Date", bucket: "toDate(timestamp)" },
];

/** What a windows rollup holds of `source`'s reports (and the rows of it a rebuild reads). */
export function windowRollupSelect(bucketExpr: string, source: string, where = ""): string {
  return `SELECT project_id, app, provider, model, ${bucketExpr} AS bucket, w.dimension AS dimension,
      ifNull(w.window, '') AS \`window\`, max(w.limit) AS limit_max, min(w.remaining) AS remaining_min
    FROM ${source} ARRAY JOIN windows AS w${where}
    GROUP BY project_id, app, provider, model, bucket, dimension, \`window\``;
}

/**
 * Per series, bucket and window (dimension and length, '' when unknown), the highest limit and
 * lowest remaining, as the reports' rollups keep the contract's figures: /usage's worst % used
 * per dimension reads these instead of every report's windows (a scan of `reports` made 50
 * polling dashboards wait 0.5-1 s for /headroom). Min and max take a report inserted twice, or a
 * backfill that overlaps the view, as once. The backfill reads the reports stored before.
 */
function windowRollups(ctx: MigrationContext): string[] {
  return WINDOW_ROLLUPS.flatMap(({ name, bucketType, bucket }) => [
    `CREATE TABLE IF NOT EXISTS ${stored(ctx, name)}${onCluster(ctx)} (
      project_id LowCardinality(String),
      app LowCardinality(String),
      provider LowCardinality(String),
      model LowCardinality(String),
      bucket ${bucketType},
      dimension LowCardinality(String),
      \`window\` LowCardinality(String),
      limit_max SimpleAggregateFunction(max, Nullable(Float64)),
      remaining_min SimpleAggregateFunction(min, Nullable(Float64))
    ) ENGINE = ${engine(ctx, "AggregatingMergeTree", name)}
    PARTITION BY toYYYYMM(bucket)
    ORDER BY (project_id, provider, model, app, bucket, dimension, \`window\`)
    TTL toDateTime(bucket) + INTERVAL ${ctx.retentionDays} DAY
    SETTINGS ${dedup(ctx)}`,
    // A sharding key, so that `headroom rederive-windows` can insert a day made again through it.
    ...distributedFront(ctx, name, "cityHash64(project_id)"),
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${ctx.db}.${name}_mv${onCluster(ctx)} TO ${stored(ctx, name)} AS
    ${windowRollupSelect(bucket, stored(ctx, "reports"))}`,
  ]);
}

function windowRollupsBackfill(ctx: MigrationContext): string[] {
  return WINDOW_ROLLUPS.map(
    ({ name, bucket }) =>
      `INSERT INTO ${stored(ctx, name)} ${windowRollupSelect(bucket, stored(ctx, "reports"))}`,
  );
}

/**
 * An alert event names the window that moved: its dimension (a rule may watch any, e.g.
 * input_tokens) and its length. Events stored before read as dimension = their metric (the
 * column's default, computed for old parts on read) and window null.
 */
function alertEventWindows(ctx: MigrationContext): string[] {
  const columns = [
    "ADD COLUMN IF NOT EXISTS dimension LowCardinality(String) DEFAULT metric AFTER metric",
    "ADD COLUMN IF NOT EXISTS `window` LowCardinality(Nullable(String)) AFTER dimension",
  ].join(",\n      ");
  return [
    `ALTER TABLE ${stored(ctx, "alert_events")}${onCluster(ctx)}\n      ${columns}`,
    ...(ctx.cluster
      ? [`ALTER TABLE ${ctx.db}.alert_events${onCluster(ctx)}\n      ${columns}`]
      : []),
    // A view keeps the columns it was made with: alert_events_v is made again to show the new ones.
    `CREATE OR REPLACE VIEW ${ctx.db}.alert_events_v${onCluster(ctx)} AS
      SELECT event_id, rule_id, project_id, provider, model, app, metric, dimension, \`window\`,
        level, used_pct, \`limit\`, remaining, reset_ms, burn_per_s, exhaustion_eta_s, warn_pct,
        critical_pct, report_id, at, inserted_at
      FROM ${ctx.db}.alert_events FINAL`,
  ];
}

/**
 * The pool a report draws on (issue 44, docs/pools.md): the keyed hash of the account its
 * provider named and the client's label, null on every report stored before (a report without
 * either is its app's alone, as those were). Few per project: LowCardinality.
 */
function reportPools(ctx: MigrationContext): string[] {
  const columns = [
    "ADD COLUMN IF NOT EXISTS account LowCardinality(Nullable(String))",
    "ADD COLUMN IF NOT EXISTS pool LowCardinality(Nullable(String))",
  ].join(",\n      ");
  return [
    `ALTER TABLE ${stored(ctx, "reports")}${onCluster(ctx)}\n      ${columns}`,
    ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.reports${onCluster(ctx)}\n      ${columns}`] : []),
    // A view keeps the columns it was made with: reports_v is made again to show the new ones.
    `CREATE OR REPLACE VIEW ${ctx.db}.reports_v${onCluster(ctx)} AS SELECT * FROM ${ctx.db}.reports FINAL`,
  ];
}

/** The pool rollups (POOL_ROLLUPS), by `bucket` of time as the reports' rollups. */
export const POOL_ROLLUPS = [
  {
    name: "report_pools_minute",
    bucketType: "DateTime('UTC')",
    bucket: "toStartOfMinute(timestamp)",
  },
  { name: "report_pools_daily", bucketType: "Date", bucket: "toDate(timestamp)" },
];

/**
 * A report's pool key as src/report/pool-key.ts makes it (poolKeyOf): 'a:' and the account's hash
 * when its provider named one, else 'l:' and the client's label, else '' (its app alone).
 */
const POOL_KEY =
  "multiIf(ifNull(account, '') != '', concat('a:', assumeNotNull(account)), ifNull(pool, '') != '', concat('l:', assumeNotNull(pool)), '')";

/** What a pool rollup holds of `source`'s reports. */
function poolRollupSelect(bucketExpr: string, source: string): string {
  return `SELECT project_id, provider, model, app, ${bucketExpr} AS bucket,
      argMaxState(${POOL_KEY}, (timestamp, report_id)) AS pool_key
    FROM ${source}
    GROUP BY project_id, provider, model, app, bucket`;
}

/**
 * Which pool each series drew on, per bucket (issue 44: /usage grouped by pool): the pool key of
 * its newest report in the bucket, so a series that moved to another pool counts in its old one
 * before and in its new one after, as the reports said. /usage joins it to the rollups. A report
 * inserted twice, or a backfill that overlaps the view, changes no argMax. The backfill reads the
 * reports stored before (those before migration 11 have no account or label: their app's pool).
 */
function poolRollups(ctx: MigrationContext): string[] {
  return POOL_ROLLUPS.flatMap(({ name, bucketType, bucket }) => [
    `CREATE TABLE IF NOT EXISTS ${stored(ctx, name)}${onCluster(ctx)} (
      project_id LowCardinality(String),
      provider LowCardinality(String),
      model LowCardinality(String),
      app LowCardinality(String),
      bucket ${bucketType},
      pool_key AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), UUID))
    ) ENGINE = ${engine(ctx, "AggregatingMergeTree", name)}
    PARTITION BY toYYYYMM(bucket)
    ORDER BY (project_id, provider, model, app, bucket)
    TTL toDateTime(bucket) + INTERVAL ${ctx.retentionDays} DAY
    SETTINGS ${dedup(ctx)}`,
    ...distributedFront(ctx, name),
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${ctx.db}.${name}_mv${onCluster(ctx)} TO ${stored(ctx, name)} AS
    ${poolRollupSelect(bucket, stored(ctx, "reports"))}`,
  ]);
}

function poolRollupsBackfill(ctx: MigrationContext): string[] {
  return POOL_ROLLUPS.map(
    ({ name, bucket }) =>
      `INSERT INTO ${stored(ctx, name)} ${poolRollupSelect(bucket, stored(ctx, "reports"))}`,
  );
}

/**
 * What a call used (issue 45): the `usage` a client may send beside `limits` (input, output and
 * cached tokens), null on every report stored before and on every report without it; the windows
 * counted against a learned or declared limit spend it. A report that sent usage has a figure:
 * the rollups count provider hints by the second definition (provider-hints.ts) in a column of
 * their own, from now on in their views and, by the backfill, for the reports stored before.
 */
function reportUsage(ctx: MigrationContext): string[] {
  const columns = ["usage_input_tokens", "usage_output_tokens", "usage_cached_tokens"]
    .map((c) => `ADD COLUMN IF NOT EXISTS ${c} Nullable(Int64)`)
    .join(",\n      ");
  const hints = `ADD COLUMN IF NOT EXISTS ${PROVIDER_HINTS_COLUMN_2} SimpleAggregateFunction(sum, UInt64)`;
  return [
    `ALTER TABLE ${stored(ctx, "reports")}${onCluster(ctx)}\n      ${columns}`,
    ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.reports${onCluster(ctx)}\n      ${columns}`] : []),
    // A view keeps the columns it was made with: reports_v is made again to show the new ones.
    `CREATE OR REPLACE VIEW ${ctx.db}.reports_v${onCluster(ctx)} AS SELECT * FROM ${ctx.db}.reports FINAL`,
    ...ROLLUPS.flatMap(({ name, bucket }) => [
      `ALTER TABLE ${stored(ctx, name)}${onCluster(ctx)} ${hints}`,
      ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.${name}${onCluster(ctx)} ${hints}`] : []),
      `ALTER TABLE ${ctx.db}.${name}_mv${onCluster(ctx)} MODIFY QUERY
    SELECT project_id, app, provider, model, ${bucket} AS bucket,
      count() AS reports,
      countIf(NOT ${HAS_LIMITS}) AS hints,
      countIf(${IS_HINT}) AS provider_hints,
      countIf(${IS_PROVIDER_HINT}) AS ${PROVIDER_HINTS_COLUMN},
      countIf(${IS_PROVIDER_HINT_2}) AS ${PROVIDER_HINTS_COLUMN_2},
      min(requests_remaining) AS requests_remaining_min,
      min(tokens_remaining) AS tokens_remaining_min,
      max(requests_limit) AS requests_limit_max,
      max(tokens_limit) AS tokens_limit_max,
      sum(ifNull(request_cost, toDecimal128(0, 12))) AS cost_sum,
      argMaxIfState(credits_remaining, timestamp, credits_remaining IS NOT NULL) AS credits_remaining_last
    FROM ${stored(ctx, "reports")}
    GROUP BY project_id, app, provider, model, bucket`,
    ]),
  ];
}

/** The reports stored before, counted in rows that add nothing else (as migration 10's backfill). */
function reportUsageBackfill(ctx: MigrationContext): string[] {
  return ROLLUPS.map(
    ({
      name,
      bucket,
    }) => `INSERT INTO ${stored(ctx, name)} (project_id, app, provider, model, bucket, reports, hints,
      provider_hints, ${PROVIDER_HINTS_COLUMN}, ${PROVIDER_HINTS_COLUMN_2}, cost_sum, credits_remaining_last)
    SELECT project_id, app, provider, model, ${bucket} AS bucket, 0, 0, 0, 0, count(),
      toDecimal128(0, 12), argMaxIfState(credits_remaining, timestamp, 0)
    FROM ${stored(ctx, "reports")} FINAL
    WHERE ${IS_PROVIDER_HINT_2}
    GROUP BY project_id, app, provider, model, bucket`,
  );
}

/**
 * What the counted windows count, per series and minute or day (issue 45: /usage's used % of a
 * window with a learned or declared limit and no stated remaining): the counted reports and their
 * usage tokens (counted-reports.ts), in columns of both rollups that their views sum from now on;
 * the backfill counts the reports stored before in rows that add nothing else (as migration
 * 13's). The days are what a month or a rolling week is counted from before a range (issue 48),
 * the minutes what a Pacific day, an hour or a minute is.
 */
function countedReports(ctx: MigrationContext): string[] {
  const columns = COUNTED_COLUMNS.map(
    (c) => `ADD COLUMN IF NOT EXISTS ${c.name} SimpleAggregateFunction(sum, ${c.type})`,
  ).join(",\n      ");
  return ROLLUPS.flatMap(({ name, bucket }) => [
    `ALTER TABLE ${stored(ctx, name)}${onCluster(ctx)}\n      ${columns}`,
    ...(ctx.cluster ? [`ALTER TABLE ${ctx.db}.${name}${onCluster(ctx)}\n      ${columns}`] : []),
    `ALTER TABLE ${ctx.db}.${name}_mv${onCluster(ctx)} MODIFY QUERY
    SELECT project_id, app, provider, model, ${bucket} AS bucket,
      count() AS reports,
      countIf(NOT ${HAS_LIMITS}) AS hints,
      countIf(${IS_HINT}) AS provider_hints,
      countIf(${IS_PROVIDER_HINT}) AS ${PROVIDER_HINTS_COLUMN},
      countIf(${IS_PROVIDER_HINT_2}) AS ${PROVIDER_HINTS_COLUMN_2},
      min(requests_remaining) AS requests_remaining_min,
      min(tokens_remaining) AS tokens_remaining_min,
      max(requests_limit) AS requests_limit_max,
      max(tokens_limit) AS tokens_limit_max,
      sum(ifNull(request_cost, toDecimal128(0, 12))) AS cost_sum,
      argMaxIfState(credits_remaining, timestamp, credits_remaining IS NOT NULL) AS credits_remaining_last,
      ${COUNTED_COLUMNS.map((c) => `${c.sum} AS ${c.name}`).join(",\n      ")}
    FROM ${stored(ctx, "reports")}
    GROUP BY project_id, app, provider, model, bucket`,
  ]);
}

function countedReportsBackfill(ctx: MigrationContext): string[] {
  return ROLLUPS.map(
    ({
      name,
      bucket,
    }) => `INSERT INTO ${stored(ctx, name)} (project_id, app, provider, model, bucket, reports, hints,
      provider_hints, ${PROVIDER_HINTS_COLUMN}, ${PROVIDER_HINTS_COLUMN_2}, cost_sum, credits_remaining_last,
      ${COUNTED_COLUMNS.map((c) => c.name).join(", ")})
    SELECT project_id, app, provider, model, ${bucket} AS bucket, 0, 0, 0, 0, 0,
      toDecimal128(0, 12), argMaxIfState(credits_remaining, timestamp, 0),
      ${COUNTED_COLUMNS.map((c) => c.sum).join(", ")}
    FROM ${stored(ctx, "reports")} FINAL
    WHERE ${IS_COUNTED}
    GROUP BY project_id, app, provider, model, bucket`,
  );
}

export const MIGRATIONS: Migration[] = [
  {
    // model is '' when the client could not see it (the contract never allows '' as a model);
    // credits are exact decimals: money-like, and summed.
    version: 1,
    name: "reports",
    statements: (ctx) => [
      `CREATE TABLE IF NOT EXISTS ${stored(ctx, "reports")}${onCluster(ctx)} (
        report_id UUID,
        project_id LowCardinality(String),
        key_id LowCardinality(String),
        app LowCardinality(String),
        provider LowCardinality(String),
        model LowCardinality(String),
        timestamp DateTime64(3, 'UTC'),
        received_at DateTime64(3, 'UTC'),
        requests_limit Nullable(Int64),
        requests_remaining Nullable(Int64),
        tokens_limit Nullable(Int64),
        tokens_remaining Nullable(Int64),
        reset_requests_ms Nullable(Int64),
        reset_tokens_ms Nullable(Int64),
        credits_limit Nullable(Decimal(38, 12)),
        credits_remaining Nullable(Decimal(38, 12)),
        request_cost Nullable(Decimal(38, 12)),
        -- When ClickHouse took the row: inserted_at - received_at is the pipeline's lag.
        inserted_at DateTime64(3, 'UTC') DEFAULT now64(3),
        INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1,
        INDEX report_id_bloom report_id TYPE bloom_filter(0.001) GRANULARITY 1
      ) ENGINE = ${engine(ctx, "ReplacingMergeTree", "reports")}
      PARTITION BY toYYYYMM(received_at)
      ORDER BY (project_id, provider, model, app, timestamp, report_id)
      TTL toDateTime(received_at) + INTERVAL ${ctx.retentionDays} DAY
      SETTINGS ${dedup(ctx)}`,
      // Sharded by report id: every copy of a report is on one shard, where FINAL can see it.
      ...distributedFront(ctx, "reports", "cityHash64(report_id)"),
      // Analysts read this view: FINAL counts a redelivered report once, merged or not.
      `CREATE VIEW IF NOT EXISTS ${ctx.db}.reports_v${onCluster(ctx)} AS SELECT * FROM ${ctx.db}.reports FINAL`,
    ],
  },
  {
    version: 2,
    name: "rollups",
    statements: (ctx) => [
      ...rollup(ctx, "reports_minute", "DateTime('UTC')", "toStartOfMinute(timestamp)"),
      ...rollup(ctx, "reports_daily", "Date", "toDate(timestamp)"),
    ],
  },
  {
    version: 3,
    name: "latest_limits",
    statements: (ctx) => [
      `CREATE TABLE IF NOT EXISTS ${stored(ctx, "latest_limits")}${onCluster(ctx)} (
        project_id LowCardinality(String),
        app LowCardinality(String),
        provider LowCardinality(String),
        model LowCardinality(String),
        last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
        limits_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
        limits AggregateFunction(argMaxIf, ${LIMITS_TUPLE}, DateTime64(3, 'UTC'), UInt8),
        credits_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
        credits AggregateFunction(argMaxIf, ${CREDITS_TUPLE}, DateTime64(3, 'UTC'), UInt8)
      ) ENGINE = ${engine(ctx, "AggregatingMergeTree", "latest_limits")}
      ORDER BY (project_id, provider, model, app)
      SETTINGS ${dedup(ctx)}`,
      ...distributedFront(ctx, "latest_limits"),
      // A provider hint (every limit null) moves last_seen but never blanks the last figures.
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${ctx.db}.latest_limits_mv${onCluster(ctx)} TO ${stored(ctx, "latest_limits")} AS
      SELECT project_id, app, provider, model,
        max(timestamp) AS last_seen,
        maxIfOrNull(timestamp, ${HAS_LIMITS}) AS limits_at,
        argMaxIfState(CAST((requests_limit, requests_remaining, tokens_limit, tokens_remaining, reset_requests_ms, reset_tokens_ms), '${LIMITS_TUPLE}'), timestamp, ${HAS_LIMITS}) AS limits,
        maxIfOrNull(timestamp, ${HAS_CREDITS}) AS credits_at,
        argMaxIfState(CAST((credits_limit, credits_remaining, request_cost), '${CREDITS_TUPLE}'), timestamp, ${HAS_CREDITS}) AS credits
      FROM ${stored(ctx, "reports")}
      GROUP BY project_id, app, provider, model`,
      `CREATE VIEW IF NOT EXISTS ${ctx.db}.latest_limits_v${onCluster(ctx)} AS
      SELECT project_id, app, provider, model, last_seen, limits_at,
        l.requests_limit AS requests_limit,
        l.requests_remaining AS requests_remaining,
        l.tokens_limit AS tokens_limit,
        l.tokens_remaining AS tokens_remaining,
        l.reset_requests_ms AS reset_requests_ms,
        l.reset_tokens_ms AS reset_tokens_ms,
        credits_at,
        c.credits_limit AS credits_limit,
        c.credits_remaining AS credits_remaining
      FROM (
        SELECT project_id, app, provider, model,
          max(last_seen) AS last_seen,
          max(limits_at) AS limits_at,
          argMaxIfMerge(limits) AS l,
          max(credits_at) AS credits_at,
          argMaxIfMerge(credits) AS c
        FROM ${ctx.db}.latest_limits
        GROUP BY project_id, app, provider, model
      )`,
    ],
  },
  {
    version: 4,
    name: "alert_events",
    statements: (ctx) => [
      // One row per alert event (alerts/alert-event.ts). Replacing by event id: an event stored
      // again (a batch evaluated twice) is one row after merges, and one row in the view at once.
      `CREATE TABLE IF NOT EXISTS ${stored(ctx, "alert_events")}${onCluster(ctx)} (
        event_id String,
        rule_id LowCardinality(String),
        project_id LowCardinality(String),
        provider LowCardinality(String),
        model LowCardinality(String),
        app LowCardinality(String),
        metric LowCardinality(String),
        level Enum8('warning' = 1, 'critical' = 2, 'resolved' = 3),
        used_pct Float64,
        \`limit\` Float64,
        remaining Float64,
        reset_ms Nullable(Int64),
        burn_per_s Nullable(Float64),
        exhaustion_eta_s Nullable(Float64),
        warn_pct Float64,
        critical_pct Float64,
        report_id UUID,
        at DateTime64(3, 'UTC'),
        inserted_at DateTime64(3, 'UTC') DEFAULT now64(3)
      ) ENGINE = ${engine(ctx, "ReplacingMergeTree", "alert_events")}
      PARTITION BY toYYYYMM(at)
      ORDER BY (project_id, at, event_id)
      TTL toDateTime(at) + INTERVAL ${ctx.retentionDays} DAY
      SETTINGS ${dedup(ctx)}`,
      ...distributedFront(ctx, "alert_events", "cityHash64(event_id)"),
      `CREATE VIEW IF NOT EXISTS ${ctx.db}.alert_events_v${onCluster(ctx)} AS
      SELECT event_id, rule_id, project_id, provider, model, app, metric, level, used_pct,
        \`limit\`, remaining, reset_ms, burn_per_s, exhaustion_eta_s, warn_pct, critical_pct,
        report_id, at, inserted_at
      FROM ${ctx.db}.alert_events FINAL`,
    ],
  },
  {
    version: 5,
    name: "deduplication_window",
    // Tables made before the window grew from 10,000 inserts.
    statements: (ctx) =>
      DEDUP_TABLES.map(
        (t) => `ALTER TABLE ${stored(ctx, t)}${onCluster(ctx)} MODIFY SETTING ${dedup(ctx)}`,
      ),
  },
  {
    version: 6,
    name: "provider_hints",
    statements: (ctx) => ROLLUPS.flatMap((r) => providerHints(ctx, r.name, r.bucket)),
    backfill: (ctx) => ROLLUPS.map((r) => providerHintsBackfill(ctx, r.name, r.bucket)),
  },
  {
    version: 7,
    name: "provider_said_and_windows",
    statements: (ctx) => providerSaid(ctx),
  },
  {
    version: 8,
    name: "alert_event_windows",
    statements: (ctx) => alertEventWindows(ctx),
  },
  {
    version: 9,
    name: "window_rollups",
    statements: (ctx) => windowRollups(ctx),
    backfill: (ctx) => windowRollupsBackfill(ctx),
  },
  {
    version: 10,
    name: "figureless_hints",
    statements: (ctx) => ROLLUPS.flatMap((r) => figurelessHints(ctx, r.name, r.bucket)),
    backfill: (ctx) => ROLLUPS.map((r) => figurelessHintsBackfill(ctx, r.name, r.bucket)),
  },
  {
    version: 11,
    name: "report_pools",
    statements: (ctx) => reportPools(ctx),
  },
  {
    version: 12,
    name: "pool_rollups",
    statements: (ctx) => poolRollups(ctx),
    backfill: (ctx) => poolRollupsBackfill(ctx),
  },
  {
    version: 13,
    name: "report_usage",
    statements: (ctx) => reportUsage(ctx),
    backfill: (ctx) => reportUsageBackfill(ctx),
  },
  {
    version: 14,
    name: "counted_reports",
    statements: (ctx) => countedReports(ctx),
    backfill: (ctx) => countedReportsBackfill(ctx),
  },
];

/** Applies what `migrations` (this release's, by default) has that the database has not. */
export function migrate(
  client: ClickHouseClient,
  ctx: MigrationContext,
  log: (msg: string) => void = () => {},
  migrations: Migration[] = MIGRATIONS,
): Promise<number[]> {
  return runMigrations(client, ctx, migrations, log);
}
