import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Config } from "../config.js";
import { errorHandler } from "../http/error-handler.js";
import { type ServerConfig, serverOptions } from "../http/server-options.js";
import type { LookupKey } from "../keys/key-cache.js";
import type { Enqueuer } from "../queue/enqueuer.js";
import type { IdJobs } from "../queue/id-jobs.js";
import type { BacklogGate } from "./backlog.js";
import { createBodiesInFlight } from "./bytes-in-flight.js";
import type { Limits } from "./limits.js";
import type { EdgeMetrics } from "./metrics.js";
import { buildOpenApi } from "./openapi.js";
import { jsonBody } from "./plugins/json-body.js";
import { lifecycle } from "./plugins/lifecycle.js";
import type { ReportIds } from "./report-ids.js";
import { batchRoutes } from "./routes/batch.js";
import { healthRoutes } from "./routes/health.js";
import { carriesMetricsToken, metricsRoutes } from "./routes/metrics.js";
import { otlpTracesRoutes } from "./routes/otlp-traces.js";
import { reportRoutes } from "./routes/report.js";
import { createWorkTurns } from "./work-turns.js";

// The edge as a function of its dependencies: server options, shared plugins, then the routes.
// Clients are created by the caller (create-edge.ts, or a test) and passed in.

export interface EdgeDeps {
  config: ServerConfig &
    Pick<
      Config,
      | "METRICS_TOKEN"
      | "METRICS_PORT"
      | "RETENTION_DAYS"
      | "POOL_SECRET"
      | "BATCH_MAX_REPORTS"
      | "BATCH_LIMIT_BYTES"
      | "EDGE_MAX_BYTES_IN_FLIGHT"
      | "EDGE_MAX_BYTES_AT_WORK"
      | "OTLP_LIMIT_BYTES"
    >;
  logger: FastifyBaseLogger;
  lookupKey: LookupKey;
  limits: Limits;
  backlog: BacklogGate;
  enqueuer: Enqueuer;
  reportIds: ReportIds;
  idJobs: IdJobs;
  metrics: EdgeMetrics;
}

export function buildApp(deps: EdgeDeps): FastifyInstance {
  const { config, backlog, metrics } = deps;
  const app = Fastify(serverOptions(config, deps.logger));

  app.register(errorHandler, { unavailable: metrics.unavailable });
  app.register(jsonBody, { bodyLimit: config.BODY_LIMIT_BYTES });
  app.register(lifecycle, { metrics });
  const bodies = createBodiesInFlight(config.EDGE_MAX_BYTES_IN_FLIGHT);
  // Read when /metrics is scraped, not set twice per request (a take and a give).
  metrics.readBytesInFlight(() => bodies.bytes);
  const turns = createWorkTurns(config.EDGE_MAX_BYTES_AT_WORK);
  metrics.readTurns(turns);

  app.register(reportRoutes, {
    ...deps,
    bodies,
    bodyLimit: config.BODY_LIMIT_BYTES,
    retentionDays: config.RETENTION_DAYS,
    poolSecret: config.POOL_SECRET,
  });
  app.register(batchRoutes, {
    ...deps,
    bodies,
    turns,
    bodyLimit: config.BATCH_LIMIT_BYTES,
    maxReports: config.BATCH_MAX_REPORTS,
    retentionDays: config.RETENTION_DAYS,
    poolSecret: config.POOL_SECRET,
  });
  app.register(otlpTracesRoutes, {
    ...deps,
    bodies,
    turns,
    bodyLimit: config.OTLP_LIMIT_BYTES,
    maxReports: config.BATCH_MAX_REPORTS,
    retentionDays: config.RETENTION_DAYS,
    poolSecret: config.POOL_SECRET,
  });
  // The public /readyz tells its figures only to the metrics token's holder (none without one).
  const hasToken = carriesMetricsToken(config);
  app.register(healthRoutes, {
    backlog,
    details: (req) => config.METRICS_TOKEN !== undefined && hasToken(req),
  });
  // With METRICS_PORT set, /metrics is on a listener of its own (create-edge.ts), not here.
  if (config.METRICS_PORT === undefined) app.register(metricsRoutes, { config, backlog, metrics });
  const openapi = buildOpenApi();
  app.get("/openapi.json", async () => openapi);

  return app;
}
