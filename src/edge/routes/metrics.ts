import { createHash, timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyBaseLogger, type FastifyPluginAsync } from "fastify";
import type { Config } from "../../config.js";
import { errorHandler } from "../../http/error-handler.js";
import { HttpError } from "../../http/errors.js";
import type { BacklogGate } from "../backlog.js";
import type { EdgeMetrics } from "../metrics.js";

// GET /metrics: Prometheus text of one edge. On the public listener by default; on a listener
// of its own when METRICS_PORT is set (then the public one has no /metrics at all). Either way,
// METRICS_TOKEN, when set, is required as `Authorization: Bearer <token>`.

export interface MetricsDeps {
  config: Pick<Config, "METRICS_TOKEN">;
  backlog: BacklogGate;
  metrics: EdgeMetrics;
}

const digest = (text: string) => createHash("sha256").update(text).digest();

export const metricsRoutes: FastifyPluginAsync<MetricsDeps> = async (app, deps) => {
  const { config, backlog, metrics } = deps;
  const expected = config.METRICS_TOKEN ? digest(`Bearer ${config.METRICS_TOKEN}`) : null;
  app.get("/metrics", async (req, reply) => {
    // Compared as digests: equal lengths, and no timing hint of how much of the token matched.
    if (expected && !timingSafeEqual(digest(req.headers.authorization ?? ""), expected)) {
      throw new HttpError("missing_project_key", "metrics need the metrics token", {
        headers: { "www-authenticate": "Bearer" },
      });
    }
    metrics.backlogJobs.set(backlog.state().backlogJobs ?? 0);
    reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
};

/** The listener of METRICS_PORT: /metrics and nothing else. */
export function buildMetricsApp(deps: MetricsDeps & { logger: FastifyBaseLogger }) {
  const app = Fastify({ loggerInstance: deps.logger, disableRequestLogging: true });
  app.register(errorHandler);
  app.register(metricsRoutes, deps);
  return app;
}
