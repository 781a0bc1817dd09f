import type { ClickHouseClient } from "@clickhouse/client";
import { v7 as uuidv7 } from "uuid";
import { migrate } from "../src/clickhouse/migrations.js";
import { createReportSink } from "../src/clickhouse/report-sink.js";
import type { ReportRow } from "../src/report/report-schema.js";
import { cpuSeconds } from "./proc-stats.js";
import { type ViewsFigures, type ViewsSample, viewsFigures } from "./views-figures.js";
import { viewsReportRows } from "./views-rows.js";

// Issue 48's row "ClickHouse µs per report, every view ÷ `reports` alone": the same rows, in the
// worker's batch size and format (its own sink, RowBinary), inserted into databases made by every
// migration, one with every materialized view, one with none (dropped after the migrations, so
// `reports` has the same DDL), and one per view with only that view. The databases take turns,
// in a rotating order, so that a slow stretch of a shared machine falls on each of them. Merges
// are stopped while inserting (a merge would land in whichever database inserts next) and
// measured after, per database, until none is left running.

const PREFIX = "bench_views";

export interface ViewsOptions {
  rowsPerInsert: number;
  /** Inserts into each database per round. */
  insertsPerRound: number;
  rounds: number;
  projects: number;
  /** Longest wait for one database's merges to settle. */
  mergeTimeoutS: number;
}

export interface ViewsPhase extends ViewsOptions {
  views: string[];
  all: ViewsSample[];
  reportsAlone: ViewsSample[];
  alone: Record<string, ViewsSample[]>;
  merges: { all: ViewsSample; reportsAlone: ViewsSample } | null;
  figures: ViewsFigures;
}

interface Target {
  name: string;
  db: string;
  samples: ViewsSample[];
  rows: number;
}

export async function runViewsPhase(
  ch: ClickHouseClient,
  serverPid: number,
  opts: ViewsOptions,
  log: (msg: string) => void,
): Promise<ViewsPhase> {
  const query = async <T>(sql: string, params: Record<string, unknown> = {}) =>
    (await ch.query({ query: sql, query_params: params, format: "JSONEachRow" })).json<T>();
  const viewsOf = async (db: string) =>
    (
      await query<{ name: string }>(
        "SELECT name FROM system.tables WHERE database = {db:String} AND engine = 'MaterializedView' ORDER BY name",
        { db },
      )
    ).map((r) => r.name);
  const tablesOf = async (db: string) =>
    (
      await query<{ name: string }>(
        "SELECT name FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree' ORDER BY name",
        { db },
      )
    ).map((r) => r.name);
  const merges = async (db: string, action: "STOP" | "START") => {
    for (const t of await tablesOf(db))
      await ch.command({ query: `SYSTEM ${action} MERGES ${db}.${t}` });
  };
  /** A database with every migration, keeping only the views in `keep`. */
  const make = async (db: string, keep: (view: string) => boolean) => {
    await ch.command({ query: `DROP DATABASE IF EXISTS ${db} SYNC` });
    await migrate(ch, { db, retentionDays: 30 });
    for (const v of await viewsOf(db))
      if (!keep(v)) await ch.command({ query: `DROP VIEW ${db}.${v} SYNC` });
    await merges(db, "STOP");
  };

  await make(`${PREFIX}_all`, () => true);
  const views = await viewsOf(`${PREFIX}_all`);
  await make(`${PREFIX}_none`, () => false);
  const targets: Target[] = [
    { name: "all", db: `${PREFIX}_all`, samples: [], rows: 0 },
    { name: "none", db: `${PREFIX}_none`, samples: [], rows: 0 },
  ];
  for (const [i, view] of views.entries()) {
    const db = `${PREFIX}_v${i}`;
    await make(db, (v) => v === view);
    targets.push({ name: view, db, samples: [], rows: 0 });
  }
  log(`  ${views.length} materialized views: ${views.join(", ")}`);

  const template = viewsReportRows(opts.rowsPerInsert, { projects: opts.projects });
  const engineUs = async () => {
    const rows = await query<{ v: string }>(
      "SELECT toString(sum(value)) AS v FROM system.events WHERE event IN ('UserTimeMicroseconds', 'SystemTimeMicroseconds')",
    );
    return Number(rows[0]?.v ?? 0);
  };
  const measure = async (body: () => Promise<number>): Promise<ViewsSample> => {
    const e0 = await engineUs();
    const p0 = cpuSeconds(serverPid) ?? 0;
    const rows = await body();
    const processUs = ((cpuSeconds(serverPid) ?? 0) - p0) * 1e6;
    return { rows, engineUs: (await engineUs()) - e0, processUs };
  };
  const insertInto = async (t: Target, batches: ReportRow[][]) => {
    const sink = createReportSink(ch, t.db);
    for (const rows of batches) await sink.insert(rows, uuidv7());
    t.rows += batches.length * opts.rowsPerInsert;
    return batches.length * opts.rowsPerInsert;
  };

  // The first insert into a fresh table pays for what the steady state does not.
  for (const t of targets) await insertInto(t, [withFreshIds(template)]);
  for (let round = 0; round < opts.rounds; round++) {
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(k + round) % targets.length] as Target;
      // Ids made before measuring: only the server's side is measured.
      const batches = Array.from({ length: opts.insertsPerRound }, () => withFreshIds(template));
      t.samples.push(await measure(() => insertInto(t, batches)));
    }
    log(`  round ${round + 1} of ${opts.rounds}`);
  }

  let mergeCost: ViewsPhase["merges"] = null;
  const [all, none] = targets as [Target, Target];
  try {
    const settle = async (t: Target): Promise<ViewsSample> =>
      measure(async () => {
        await merges(t.db, "START");
        await mergesSettled(query, t.db, opts.mergeTimeoutS);
        return t.rows;
      });
    mergeCost = { all: await settle(all), reportsAlone: await settle(none) };
  } catch (err) {
    log(`  merges not measured: ${(err as Error).message}`);
  }
  for (const t of targets) await ch.command({ query: `DROP DATABASE IF EXISTS ${t.db} SYNC` });

  const alone = Object.fromEntries(targets.slice(2).map((t) => [t.name, t.samples]));
  const measured = { all: all.samples, reportsAlone: none.samples, alone, merges: mergeCost };
  return { ...opts, views, ...measured, figures: viewsFigures(measured) };
}

/** Until no merge of `db` has run, and its active parts have not changed, for 2 s (a merge starts within its selector's wake-up). */
export async function mergesSettled(
  query: <T>(sql: string, params?: Record<string, unknown>) => Promise<T[]>,
  db: string,
  timeoutS: number,
): Promise<void> {
  const deadline = performance.now() + timeoutS * 1000;
  let last = "";
  let quietSince = performance.now();
  while (performance.now() < deadline) {
    const [state] = await query<{ merging: string; parts: string }>(
      `SELECT (SELECT toString(count()) FROM system.merges WHERE database = {db:String}) AS merging,
        (SELECT toString(count()) FROM system.parts WHERE database = {db:String} AND active) AS parts`,
      { db },
    );
    const now = `${state?.merging}/${state?.parts}`;
    if (now !== last || state?.merging !== "0") {
      last = now;
      quietSince = performance.now();
    } else if (performance.now() - quietSince >= 2_000) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${db}'s merges still running after ${timeoutS} s`);
}

function withFreshIds(rows: ReportRow[]): ReportRow[] {
  const now = Date.now();
  return rows.map((r) => {
    const copy = r.slice();
    copy[0] = uuidv7({ msecs: now });
    return copy;
  });
}
