import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { KeyLookup } from "../../keys/key-store.js";
import { parseQuery } from "../params.js";
import { type MetricsDeps, readMetrics } from "../queries/metrics.js";

// GET /api/v1/metrics: the key's project as Prometheus metrics, OpenMetrics or the 0.0.4 text
// format by the Accept header. The gauges are /api/v1/headroom's figures, one sample per window,
// read from the same hot copy in Redis (readHeadroom with the same deps); the counters are
// today's row of the daily rollup, so they only ever grow within a UTC day and restart from
// zero at midnight, which rate() and increase() read as a counter reset. The reading:
// queries/metrics.ts.

export const metricsQuery = z.strictObject({});

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
