import { PROVIDER_HINTS_SUM } from "../../clickhouse/provider-hints.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { CONTENT_TYPES, negotiate, writeExposition } from "../metrics/exposition.js";
import { headroomFamilies, type SeriesCounters, seriesKey } from "../metrics/families.js";
import { num, type ReadStore } from "../read-store.js";
import { chDate, WINDOW_MS } from "../time-range.js";
import { type HeadroomDeps, readHeadroom } from "./headroom.js";

// The exposition of GET /api/v1/metrics: /headroom's series (readHeadroom with the same deps)
// as gauges (each labelled with its pool), and today's row of the daily rollup (its SQL here) as
// counters.

export interface MetricsDeps extends HeadroomDeps {
  maxSeries: number;
}

interface CounterRow {
  provider: string;
  model: string;
  app: string;
  reports: string;
  hints: string;
  cost: number;
}

async function todaysCounters(
  store: ReadStore,
  project: string,
  day: number,
): Promise<Map<string, SeriesCounters>> {
  const rows = await store.rows<CounterRow>(
    `SELECT provider, model, app, sum(reports) AS reports, ${PROVIDER_HINTS_SUM} AS hints,
      toFloat64(sum(cost_sum)) AS cost
    FROM ${store.db}.reports_daily
    WHERE project_id = {project:String} AND bucket = {day:Date}
    GROUP BY provider, model, app`,
    { project, day: chDate(day) },
  );
  return new Map(
    rows.map((r) => [
      seriesKey(r.provider, r.model, r.app),
      { reports: num(r.reports) ?? 0, hints: num(r.hints) ?? 0, cost: r.cost },
    ]),
  );
}

export async function readMetrics(deps: MetricsDeps, project: KeyLookup, accept?: string) {
  const at = (deps.now ?? Date.now)();
  const day = Math.floor(at / WINDOW_MS.day) * WINDOW_MS.day;
  const [headroom, counters] = await Promise.all([
    readHeadroom({ ...deps, now: () => at }, project, { group: "both" }),
    todaysCounters(deps.store, project.projectId, day),
  ]);
  // Each series' pool, for the `pool` label: members of a pool by account or label.
  const pools = new Map<string, string>();
  for (const p of headroom.pools ?? []) {
    if (p.kind === "app") continue;
    for (const m of p.members) pools.set(seriesKey(p.provider, p.model ?? "", m.app), p.pool);
  }
  const format = negotiate(accept);
  const families = headroomFamilies({
    at,
    series: headroom.series ?? [],
    counters,
    countersSince: day,
    maxSeries: deps.maxSeries,
    pools,
  });
  return { contentType: CONTENT_TYPES[format], body: writeExposition(families, format) };
}
