import { createHash, timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Config } from "../config.js";
import type { BacklogGate } from "./backlog.js";
import { HttpError } from "./errors.js";
import type { EdgeMetrics } from "./metrics.js";

// GET /metrics: Prometheus text of one edge. On the public listener by default; on a listener
// of its own when METRICS_PORT is set (then the public one has no /metrics at all). Either way,
// METRICS_TOKEN, when set, is required as `Authorization: Bearer <token>`.

export interface MetricsDeps {
  config: Pick<Config, "METRICS_TOKEN">;
  backlog: BacklogGate;
  metrics: EdgeMetrics;
}

const digest = (text: string) => createHash("sha256").update(text).digest();

export function registerMetricsRoute(app: FastifyInstance, deps: MetricsDeps): void {
  const { config, backlog, metrics } = deps;
  const expected = config.METRICS_TOKEN ? digest(`Bearer ${config.METRICS_TOKEN}`) : null;
  app.get("/metrics", async (req, reply) => {
    // Compared as digests: equal lengths, and no timing hint of how much of the token matched.
    if (expected && !timingSafeEqual(digest(req.headers.authorization ?? ""), expected)) {
      const err = new HttpError("missing_project_key", "metrics need the metrics token");
      return reply.code(err.status).header("www-authenticate", "Bearer").send(err.toBody());
    }
    metrics.backlogJobs.set(backlog.state().backlogJobs ?? 0);
    reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}

/** The listener of METRICS_PORT: /metrics and nothing else. */
export function buildMetricsApp(deps: MetricsDeps & { logger: FastifyBaseLogger }) {
  const app = Fastify({ loggerInstance: deps.logger, disableRequestLogging: true });
  registerMetricsRoute(app, deps);
  app.setNotFoundHandler((req, reply) => {
    const err = new HttpError("not_found", `no route for ${req.method} ${req.url.split("?")[0]}`);
    return reply.code(err.status).send(err.toBody());
  });
  return app;
}
