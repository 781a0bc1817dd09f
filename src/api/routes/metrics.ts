import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
import { CONTENT_TYPES, negotiate, writeExposition } from "../metrics/exposition.js";
import { headroomFamilies, type SeriesCounters, seriesKey } from "../metrics/families.js";
import { parseQuery } from "../params.js";
import { num, type ReadStore } from "../read-store.js";
import { chDate, WINDOW_MS } from "../time-range.js";
import { type HeadroomDeps, readHeadroom } from "./headroom.js";

// GET /api/v1/metrics: the key's project as Prometheus metrics, OpenMetrics or the 0.0.4 text
// format by the Accept header. The gauges are /api/v1/headroom's figures, one sample per window,
// read from the same hot copy in Redis (readHeadroom with the same deps); the counters are
// today's row of the daily rollup, so they only ever grow within a UTC day and restart from
// zero at midnight, which rate() and increase() read as a counter reset.

export const metricsQuery = z.strictObject({});

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
    `SELECT provider, model, app, sum(reports) AS reports, sum(provider_hints) AS hints,
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
    readHeadroom({ ...deps, now: () => at }, project, {}),
    todaysCounters(deps.store, project.projectId, day),
  ]);
  const format = negotiate(accept);
  const families = headroomFamilies({
    at,
    series: headroom.series,
    counters,
    countersSince: day,
    maxSeries: deps.maxSeries,
  });
  return { contentType: CONTENT_TYPES[format], body: writeExposition(families, format) };
}

const gzipAsync = promisify(gzip);

/** Prometheus asks for gzip; a scrape of a thousand series shrinks about 20 times (level 1: fast). */
const acceptsGzip = (header: string | undefined) =>
  (header ?? "").split(",").some((part) => {
    const [coding = "", ...params] = part.split(";").map((p) => p.trim().toLowerCase());
    return coding === "gzip" && !params.some((p) => /^q=0(\.0*)?$/.test(p));
  });

export const metricsRoutes: FastifyPluginAsync<MetricsDeps> = async (app, deps) => {
  app.get("/api/v1/metrics", async (req, reply) => {
    parseQuery(metricsQuery, req.query);
    const out = await readMetrics(deps, req.project as KeyLookup, req.headers.accept);
    reply.header("content-type", out.contentType).header("vary", "Accept, Accept-Encoding");
    if (!acceptsGzip(req.headers["accept-encoding"])) return reply.send(out.body);
    return reply.header("content-encoding", "gzip").send(await gzipAsync(out.body, { level: 1 }));
  });
};
