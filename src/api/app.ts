import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { DeriveWindows } from "../alerts/row-windows.js";
import type { AlertRule } from "../alerts/rule.js";
import type { Config } from "../config.js";
import type { HotStore } from "../headroom/hot-store.js";
import type { HotVersions } from "../headroom/hot-versions.js";
import type { AuthFailureLimits } from "../http/authenticate.js";
import { errorHandler } from "../http/error-handler.js";
import { type ServerConfig, serverOptions } from "../http/server-options.js";
import type { LookupKey } from "../keys/key-cache.js";
import type { DeclarationsReader } from "../providers/declared-limit.js";
import { type ControlRoutesDeps, controlRoutes } from "./control/routes.js";
import { buildApiOpenApi, buildControlOpenApi } from "./openapi.js";
import { readAuth } from "./plugins/read-auth.js";
import { createAdviceMemory } from "./queries/advice.js";
import type { QueryCache } from "./query-cache.js";
import type { ReadLimit } from "./read-limit.js";
import type { ReadStore } from "./read-store.js";
import { adviceRoutes } from "./routes/advice.js";
import { alertEventsRoutes } from "./routes/alert-events.js";
import { headroomRoutes } from "./routes/headroom.js";
import { metricsRoutes } from "./routes/metrics.js";
import { defaultPageDir, pageRoutes } from "./routes/page.js";
import { reportsRoutes } from "./routes/reports.js";
import { spendRoutes } from "./routes/spend.js";
import { usageRoutes } from "./routes/usage.js";

// The read API as a function of its dependencies: the edge's server options and error handler,
// open health and OpenAPI routes and the page, and the /api/v1 routes behind read keys.

export interface ApiDeps {
  config: ServerConfig &
    Pick<
      Config,
      | "READ_MAX_POINTS"
      | "READ_STALE_AFTER_S"
      | "READ_METRICS_MAX_SERIES"
      | "READ_USAGE_FULL_REFRESH_MS"
    >;
  logger: FastifyBaseLogger;
  lookupKey: LookupKey;
  authLimits: AuthFailureLimits;
  readLimit: ReadLimit;
  store: ReadStore;
  /** Shared answers to queries over the last 24 h (see usage.ts). */
  answers?: QueryCache;
  /** Shared answers of /spend, /alerts/events and /reports over a range ending now (ends-now.ts). */
  ranges?: QueryCache;
  /** Shared /api/v1/headroom answers, for READ_HEADROOM_TTL_MS (see headroom.ts). */
  headroomAnswers?: QueryCache;
  /** The hot headroom the ingest workers keep in Redis. */
  hot?: HotStore;
  /** Its versions, pushed by the workers (hot-versions.ts). */
  hotVersions?: HotVersions;
  rulesFor(project: string): Promise<AlertRule[]>;
  /** The control plane, when CONTROL_LISTEN=api: served beside the read routes. */
  control?: ControlRoutesDeps;
  /** How a refill of the hot copy derives windows: src/providers' unless a test's. */
  deriveWindows?: DeriveWindows;
  /** The projects' declared limits (src/providers/declared-limit.ts); absent: none declared. */
  declarations?: DeclarationsReader;
  /** Where the built page is (dist/page by default). */
  pageDir?: string;
  now?: () => number;
}

/** Projects whose hot copy the advice holds in memory at most (least recently asked dropped). */
const ADVICE_MAX_PROJECTS = 10_000;
/** Without pushed versions, advice reads a project's copy again when it is older than this. */
const ADVICE_MAX_AGE_MS = 500;
/** Advice reads a project's copy again at most this often (a report shows within it, and a read). */
const ADVICE_READ_GAP_MS = 250;
/** A pushed version reads the copy again at once for a project advice was asked of this lately. */
const ADVICE_PREFETCH_MS = 60_000;

export function buildApiApp(deps: ApiDeps): FastifyInstance {
  const { config, store, now } = deps;
  const app = Fastify(serverOptions(config, deps.logger));
  app.register(errorHandler);

  app.get("/healthz", async () => ({ status: "ok" }));
  const openapi = buildApiOpenApi({ control: deps.control !== undefined });
  app.get("/api/v1/openapi.json", async () => openapi);
  // The page is open: it holds no data, and asks for a read key itself.
  app.register(pageRoutes, { dir: deps.pageDir ?? defaultPageDir() });

  app.register(async (v1) => {
    v1.register(readAuth, {
      lookupKey: deps.lookupKey,
      limits: deps.authLimits,
      readLimit: deps.readLimit,
    });
    const headroom = {
      store,
      rulesFor: deps.rulesFor,
      staleAfterMs: config.READ_STALE_AFTER_S * 1000,
      hot: deps.hot,
      answers: deps.headroomAnswers,
      versions: deps.hotVersions,
      deriveWindows: deps.deriveWindows,
      declarations: deps.declarations,
      now,
    };
    v1.register(headroomRoutes, headroom);
    v1.register(usageRoutes, {
      store,
      maxPoints: config.READ_MAX_POINTS,
      answers: deps.answers,
      fullRefreshMs: config.READ_USAGE_FULL_REFRESH_MS,
      headroom,
      now,
    });
    v1.register(reportsRoutes, { store, answers: deps.ranges, now });
    v1.register(alertEventsRoutes, { store, answers: deps.ranges, now });
    v1.register(spendRoutes, { store, answers: deps.ranges, headroom, now });
    // The same hot copy as /headroom (issue 37: one source per figure); its answers are not
    // shared, since a scrape's body is its own.
    v1.register(metricsRoutes, {
      store,
      rulesFor: deps.rulesFor,
      staleAfterMs: config.READ_STALE_AFTER_S * 1000,
      maxSeries: config.READ_METRICS_MAX_SERIES,
      hot: deps.hot,
      deriveWindows: deps.deriveWindows,
      declarations: deps.declarations,
      now,
    });
  });

  // Advice, in a scope of its own: a report key may ask too (its own project's, as any key).
  const advice = createAdviceMemory(
    {
      store,
      rulesFor: deps.rulesFor,
      staleAfterMs: config.READ_STALE_AFTER_S * 1000,
      hot: deps.hot,
      versions: deps.hotVersions,
      deriveWindows: deps.deriveWindows,
      declarations: deps.declarations,
      now,
    },
    {
      maxProjects: ADVICE_MAX_PROJECTS,
      maxAgeMs: ADVICE_MAX_AGE_MS,
      minReadGapMs: ADVICE_READ_GAP_MS,
      prefetchForMs: ADVICE_PREFETCH_MS,
    },
  );
  app.addHook("onClose", async () => advice.close());
  app.register(async (v1) => {
    v1.register(readAuth, {
      lookupKey: deps.lookupKey,
      limits: deps.authLimits,
      readLimit: deps.readLimit,
      scopes: ["read", "report"],
    });
    v1.register(adviceRoutes, { memory: advice });
  });

  // In a scope of its own: its management-key hook is not the read routes' read-key one.
  if (deps.control) app.register(controlRoutes, deps.control);

  return app;
}

/** The control plane on a listener of its own (CONTROL_LISTEN=<port>), for an internal network. */
export function buildControlApp(
  deps: Pick<ApiDeps, "config" | "logger"> & { control: ControlRoutesDeps },
): FastifyInstance {
  const app = Fastify(serverOptions(deps.config, deps.logger));
  app.register(errorHandler);
  app.get("/healthz", async () => ({ status: "ok" }));
  const openapi = buildControlOpenApi();
  app.get("/api/v1/openapi.json", async () => openapi);
  app.register(controlRoutes, deps.control);
  return app;
}
