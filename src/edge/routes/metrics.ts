import { createHash, timingSafeEqual } from "node:crypto";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyPluginAsync,
  type FastifyRequest,
  LogController,
} from "fastify";
import type { Config } from "../../config.js";
import { errorHandler } from "../../http/error-handler.js";
import { HttpError } from "../../http/errors.js";
import type { BacklogGate } from "../backlog.js";
import type { EdgeMetrics } from "../metrics.js";
import { healthRoutes } from "./health.js";

// GET /metrics: Prometheus text of one edge. On the public listener by default; on a listener
// of its own when METRICS_PORT is set (then the public one has no /metrics at all, and that
// listener also answers /readyz with its figures). Either way, METRICS_TOKEN, when set, is
// required as `Authorization: Bearer <token>`.

export interface MetricsDeps {
  config: Pick<Config, "METRICS_TOKEN">;
  backlog: BacklogGate;
  metrics: EdgeMetrics;
}

const digest = (text: string) => createHash("sha256").update(text).digest();

/**
 * Whether a request carries METRICS_TOKEN (true for every request when none is set). Compared as
 * digests: equal lengths, and no timing hint of how much of the token matched.
 */
export function carriesMetricsToken(config: Pick<Config, "METRICS_TOKEN">) {
  const expected = config.METRICS_TOKEN ? digest(`Bearer ${config.METRICS_TOKEN}`) : null;
  return (req: FastifyRequest) =>
    expected === null || timingSafeEqual(digest(req.headers.authorization ?? ""), expected);
}

export const metricsRoutes: FastifyPluginAsync<MetricsDeps> = async (app, deps) => {
  const { config, backlog, metrics } = deps;
  const authorized = carriesMetricsToken(config);
  app.get("/metrics", async (req, reply) => {
    if (!authorized(req)) {
      throw new HttpError("missing_project_key", "metrics need the metrics token", {
        headers: { "www-authenticate": "Bearer" },
      });
    }
    const state = backlog.state();
    metrics.backlogJobs.set(state.backlogJobs ?? 0);
    metrics.backlogMaxJobs.set(backlog.maxJobs);
    if (state.memoryRatio === null) metrics.redisMemoryRatio.reset();
    else metrics.redisMemoryRatio.set(state.memoryRatio);
    metrics.primariesShortOfReplicas.set(state.replicasShort.length);
    reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
};

/** The listener of METRICS_PORT: /metrics, and /readyz with its figures. */
export function buildMetricsApp(deps: MetricsDeps & { logger: FastifyBaseLogger }) {
  const app = Fastify({
    loggerInstance: deps.logger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.register(errorHandler);
  app.register(metricsRoutes, deps);
  app.register(healthRoutes, { backlog: deps.backlog, details: carriesMetricsToken(deps.config) });
  return app;
}
