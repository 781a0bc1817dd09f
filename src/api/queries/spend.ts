import type { z } from "zod";
import { STARTUP_HINTS_SUM } from "../../clickhouse/provider-hints.js";
import type { SeriesView } from "../../headroom/headroom-view.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { filterSql } from "../params.js";
import { num, type ReadStore } from "../read-store.js";
import type { spendQuery, spendResponse } from "../schemas/spend.js";
import { sharedIfEndsNow } from "../ends-now.js";
import type { QueryCache } from "../query-cache.js";
import {
  alignRange,
  chDate,
  chSeconds,
  MAX_RANGE_MS,
  type Range,
  resolveRange,
  widen,
} from "../time-range.js";
import { type HeadroomDeps, readHeadroom } from "./headroom.js";

// The figures of GET /api/v1/spend: SQL over the rollups and row mapping; the credits' burn is
// /headroom's reading of the project.

export interface SpendDeps {
  store: ReadStore;
  /** The rows of a range ending now, shared by what was asked (ends-now.ts). */
  answers?: QueryCache;
  /** Where the credits' burn comes from: /headroom's reading of the project. */
  headroom: HeadroomDeps;
  now?: () => number;
}

interface SpendRow {
  provider: string;
  cost: number;
  requests: string;
  credits_last: number | null;
}

function spendSql(db: string, daily: boolean, filters: string) {
  const type = daily ? "Date" : "DateTime";
  return `SELECT provider, toFloat64(sum(cost_sum)) AS cost, sum(reports) - ${STARTUP_HINTS_SUM} AS requests,
    toFloat64(argMaxIfMerge(credits_remaining_last)) AS credits_last
  FROM ${db}.${daily ? "reports_daily" : "reports_minute"}
  WHERE project_id = {project:String}
    AND bucket >= {from:${type}} AND bucket < {to:${type}}${filters}
  GROUP BY provider
  ORDER BY provider`;
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

/** Per provider, the credits of its series with the newest credits report. */
function creditsByProvider(series: SeriesView[]): Map<string, SeriesView["credits"]> {
  const newest = new Map<string, SeriesView>();
  for (const v of series) {
    if (v.credits.remaining === null || v.credits_reported_at === null) continue;
    const kept = newest.get(v.provider);
    if (!kept || (kept.credits_reported_at ?? "") < v.credits_reported_at)
      newest.set(v.provider, v);
  }
  return new Map([...newest].map(([provider, v]) => [provider, v.credits]));
}

/** The range's rows per provider, with the range they are of (resolved when they are read). */
async function spendRows(
  deps: SpendDeps,
  project: KeyLookup,
  q: z.output<typeof spendQuery>,
  uncached: boolean,
): Promise<{ aligned: Range; rows: SpendRow[] }> {
  const range = resolveRange(q, (deps.now ?? Date.now)());
  // Minute rollups while the range, widened to whole minutes, is within their cap.
  const inMinutes = widen(range, "minute");
  const daily = inMinutes.to - inMinutes.from > MAX_RANGE_MS.minute;
  const aligned = alignRange(range, daily ? "day" : "minute");
  const param = daily ? chDate : chSeconds;
  const { sql, params } = filterSql(q);
  const rows = await deps.store.rows<SpendRow>(
    spendSql(deps.store.db, daily, sql),
    { project: project.projectId, from: param(aligned.from), to: param(aligned.to), ...params },
    uncached,
  );
  return { aligned, rows };
}

export async function readSpend(
  deps: SpendDeps,
  project: KeyLookup,
  q: z.output<typeof spendQuery>,
): Promise<z.infer<typeof spendResponse>> {
  const now = (deps.now ?? Date.now)();
  // The rows may be shared (a range ending now); the credits' burn is always this moment's.
  const { aligned, rows } = await sharedIfEndsNow(
    deps.answers,
    project.projectId,
    "spend",
    q,
    (shared) => spendRows(deps, project, q, shared),
  );
  const { from: _f, to: _t, last: _l, ...filters } = q;
  const credits = rows.some((r) => r.credits_last !== null)
    ? creditsByProvider(
        (
          await readHeadroom({ ...deps.headroom, now: () => now }, project, {
            ...filters,
            group: "app",
          })
        ).series ?? [],
      )
    : new Map<string, SeriesView["credits"]>();
  const hours = (aligned.to - aligned.from) / 3_600_000;
  return {
    from: new Date(aligned.from).toISOString(),
    to: new Date(aligned.to).toISOString(),
    providers: rows.map((r) => {
      const cost = Number(r.cost);
      const c = credits.get(r.provider);
      return {
        provider: r.provider,
        cost,
        requests: Number(r.requests),
        burn_per_hour: round(cost / hours, 6),
        credits_remaining: num(r.credits_last),
        credits_burn_per_hour: c?.burn ?? null,
        credits_burn_unknown: c ? c.burn_unknown : "no_figures",
        depleted_at: c?.exhausted_at ?? null,
        hours_until_depleted:
          c?.exhaustion_eta_s == null ? null : round(c.exhaustion_eta_s / 3600, 2),
        hours_until_depleted_unknown: c ? c.exhaustion_unknown : "no_figures",
      };
    }),
  };
}
