import type { ClickHouseClient } from "@clickhouse/client";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { DeriveWindows } from "../alerts/row-windows.js";
import { createRuleCache } from "../alerts/rule-cache.js";
import { createRuleStore } from "../alerts/rule-store.js";
import { createClickHouse } from "../clickhouse/client.js";
import type { Config } from "../config.js";
import { createDeclarationsReader } from "../control/declarations-cache.js";
import { createControl } from "../control/service.js";
import { createHotStore, hotKeys } from "../headroom/hot-store.js";
import { createHotVersions, type HotVersions } from "../headroom/hot-versions.js";
import { createKeyCache } from "../keys/key-cache.js";
import { createKeyStore, type KeyStore } from "../keys/key-store.js";
import { createAuthFailureLimits } from "../limits/auth-failures.js";
import { createControlWriteLimits } from "../limits/control-writes.js";
import { redisTokenBucket } from "../limits/token-bucket.js";
import type { DeclarationsReader } from "../providers/declared-limit.js";
import {
  closeRedis,
  createProducerRedis,
  type RedisClient,
  waitForReady,
} from "../redis/connections.js";
import { redisTopology } from "../redis/topology.js";
import { buildApiApp, buildControlApp } from "./app.js";
import { createIdempotency } from "./control/idempotency.js";
import type { ControlRoutesDeps } from "./control/routes.js";
import { rollingAnswerBytes } from "./queries/usage.js";
import { createQueryCache, type QueryCache } from "./query-cache.js";
import { createReadLimit } from "./read-limit.js";
import { createReadStore, rowsBytes } from "./read-store.js";
import { heldAnswerBytes } from "./routes/headroom.js";

// Wires one read API process from configuration: clients are created here, once, and passed
// down. It shares the key store, the limits' Redis scripts and the config with the edge.

export interface Api {
  app: FastifyInstance;
  /** The control plane's own listener (CONTROL_LISTEN=<port>), to listen on. */
  controlApp?: FastifyInstance;
  redis: RedisClient;
  keyStore: KeyStore;
  /** The answer caches, for what they hold (`usage()`). */
  caches: { rows: QueryCache; usage: QueryCache; headroom: QueryCache };
  /** Stop intake, let in-flight requests finish, close Redis and ClickHouse. */
  close(): Promise<void>;
}

export async function createApi(
  config: Config,
  logger: FastifyBaseLogger,
  opts: {
    clickhouse?: ClickHouseClient;
    now?: () => number;
    deriveWindows?: DeriveWindows;
    /** The projects' declared limits and pools; absent: read from Redis (control/declarations-cache.ts). */
    declarations?: DeclarationsReader;
  } = {},
): Promise<Api> {
  const redis = createProducerRedis(redisTopology(config));
  redis.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));
  await waitForReady(redis);
  const clickhouse = opts.clickhouse ?? createClickHouse(config);
  const ownsClickHouse = opts.clickhouse === undefined;

  const keyStore = createKeyStore(redis);
  // Only the failed-authentication limits (the read API has no burst or quota of the edge's),
  // counted with the edges': guesses spread over both planes get the limit once.
  const limits = createAuthFailureLimits({
    points: config.AUTH_FAILURES_PER_IP,
    windowS: config.AUTH_FAILURE_WINDOW_S,
    maxClients: config.AUTH_FAILURE_MAX_CLIENTS,
    shared: { redis, deployment: config.QUEUE_PREFIX },
  });
  const rules = createRuleCache(
    createRuleStore(redis, config.QUEUE_PREFIX),
    config.ALERTS_RULES_TTL_MS,
  );
  // ClickHouse queries' rows, whole answers to "the last 24 h" over them (usage.ts), the other
  // answers over a range ending now (ends-now.ts), and /headroom answers: each bounded by
  // entries and bytes, in all and per project.
  const bounds = {
    maxEntries: config.READ_CACHE_MAX_ENTRIES,
    maxBytes: config.READ_CACHE_MAX_BYTES,
    projectShare: config.READ_CACHE_PROJECT_PCT / 100,
  };
  const cacheOptions = {
    ...bounds,
    ttlMs: config.READ_CACHE_TTL_MS,
    staleMs: config.READ_CACHE_STALE_MS,
    backgroundRefreshes: config.READ_CACHE_REFRESHES,
  };
  const caches = {
    rows: createQueryCache({ ...cacheOptions, sizeOf: rowsBytes }),
    usage: createQueryCache({ ...cacheOptions, sizeOf: rollingAnswerBytes }),
    ranges: createQueryCache({ ...cacheOptions, sizeOf: rowsBytes }),
    headroom: createQueryCache({
      ...bounds,
      ttlMs: config.READ_HEADROOM_TTL_MS,
      sizeOf: heldAnswerBytes,
    }),
  };
  const hot = createHotStore(redis, config.QUEUE_PREFIX, {
    maxSeriesPerProject: config.READ_HOT_MAX_SERIES_PER_PROJECT,
    ttlMs: config.READ_HOT_SERIES_TTL_S * 1000,
  });
  // A connection of its own: a subscribed one runs no other command.
  const subscriber = redis.duplicate();
  subscriber.on("error", (err: Error) =>
    logger.warn({ err: err.message }, "redis subscriber connection error"),
  );
  let hotVersions: HotVersions;
  try {
    await waitForReady(subscriber);
    hotVersions = await createHotVersions(subscriber, hotKeys(config.QUEUE_PREFIX).versions, {
      maxProjects: config.READ_CACHE_MAX_ENTRIES,
      onError: (err) => logger.warn({ err: err.message }, "hot versions: subscribing again failed"),
    });
  } catch (err) {
    subscriber.disconnect();
    await limits.close();
    await closeRedis(redis);
    throw err;
  }
  const lookupKey = createKeyCache(keyStore.lookup, { ttlMs: config.KEY_CACHE_TTL_MS });
  // The control plane (CONTROL_LISTEN): beside the read routes, or on a listener of its own.
  const control: ControlRoutesDeps | undefined =
    config.CONTROL_LISTEN === "off"
      ? undefined
      : {
          control: createControl(redis, config, { now: opts.now }),
          lookupKey,
          limits,
          idempotent: createIdempotency(redis),
          writeLimits: createControlWriteLimits(redis, {
            perKeyPerMin: config.CONTROL_WRITES_PER_MIN_PER_KEY,
            perProjectPerMin: config.CONTROL_WRITES_PER_MIN_PER_PROJECT,
            deployment: config.QUEUE_PREFIX,
          }),
        };
  const app = buildApiApp({
    config,
    logger,
    lookupKey,
    authLimits: limits,
    readLimit: createReadLimit({
      take: redisTokenBucket(redis, "headroom:read"),
      ratePerS: config.READ_RATE_PER_S,
      burst: config.READ_BURST,
    }),
    store: createReadStore({
      clickhouse,
      db: config.CLICKHOUSE_DATABASE,
      cache: caches.rows,
    }),
    answers: caches.usage,
    ranges: caches.ranges,
    headroomAnswers: caches.headroom,
    hot,
    hotVersions,
    rulesFor: async (project) => (await rules.rulesFor([project])).get(project) ?? [],
    deriveWindows: opts.deriveWindows,
    declarations: opts.declarations ?? createDeclarationsReader(redis, config.QUEUE_PREFIX),
    now: opts.now,
    ...(config.CONTROL_LISTEN === "api" ? { control } : {}),
  });
  const controlApp =
    control && typeof config.CONTROL_LISTEN === "number"
      ? buildControlApp({ config, logger, control })
      : undefined;

  return {
    app,
    controlApp,
    redis,
    keyStore,
    caches,
    async close() {
      await app.close();
      await controlApp?.close();
      await hotVersions.close();
      await limits.close();
      await closeRedis(redis);
      if (ownsClickHouse) await clickhouse.close();
    },
  };
}
