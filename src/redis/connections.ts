import { Cluster, type ClusterOptions, type Redis, type RedisOptions } from "ioredis";
import { REDIS_ACK_TIMEOUT_MAX_MS } from "../config.js";
import { COMMAND_TIMED_OUT, ReadyGuardedRedis } from "./ready-guard.js";
import { RevivingRedis } from "./reviving-client.js";
import type { RedisTopology } from "./topology.js";

// Redis clients by role (BullMQ's production guide): the edge must fail fast when Redis is away
// so a request becomes a 503 at once; workers must wait for Redis as long as it takes. Each role
// is built the same way on every topology (one server, Sentinel, Cluster).

/** A client of any topology: the commands Headroom uses are the same on both. */
export type RedisClient = Redis | Cluster;

/** Above the longest WAIT for replicas, which must be answered before it. */
export const PRODUCER_COMMAND_TIMEOUT_MS = REDIS_ACK_TIMEOUT_MAX_MS + 1_000;

const PRODUCER: RedisOptions = {
  enableOfflineQueue: false,
  // Commands issued in the same tick (burst limits, key lookups of concurrent requests) share
  // one write: measured +20% reports/s on the edge.
  enableAutoPipelining: true,
  // The burst's token bucket defines its script command on this client lazily, at first use; an
  // auto-pipeline created before that lacks the command and ioredis then crashes the process
  // ("results[i] is not iterable", ioredis#1931). Sent on its own instead.
  autoPipeliningIgnoredCommands: ["headroomTakeTokens"],
  maxRetriesPerRequest: 1,
  connectTimeout: 2_000,
  // A connection that went silently dead (Redis restarted without resetting it) would hold
  // requests forever: a command unanswered this long fails, and the request gets its 503.
  commandTimeout: PRODUCER_COMMAND_TIMEOUT_MS,
  // The edge's writes are not idempotent: one whose fate is unknown is a 503, never sent
  // again on the next connection behind the client's back.
  autoResendUnfulfilledCommands: false,
  retryStrategy: (times) => Math.min(times * 100, 1_000),
};

const WORKER: RedisOptions = {
  maxRetriesPerRequest: null,
  retryStrategy: (times) => Math.min(times * 200, 2_000),
};

/**
 * A command-line tool's connection: a command still unanswered after a few reconnections fails,
 * so a person at a terminal is never left waiting on a Redis that went away.
 */
const CLI: RedisOptions = {
  maxRetriesPerRequest: 3,
  retryStrategy: (times) => Math.min(times * 200, 2_000),
};

/** Cluster-level behaviour per role; node connections take the role's RedisOptions. */
const CLUSTER_ROLE: Record<"producer" | "worker" | "cli", ClusterOptions> = {
  producer: {
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: PRODUCER.autoPipeliningIgnoredCommands ?? [],
    // A command in flight when its node's connection closed may have been applied: the cluster
    // client would send it again to the promoted replica. The edge's writes are not idempotent,
    // so it fails instead (a 503) — MOVED, ASK, TRYAGAIN and CLUSTERDOWN are still followed,
    // because Redis did not run the command then.
    retryDelayOnFailover: 0,
    clusterRetryStrategy: (times) => Math.min(times * 100, 1_000),
  },
  worker: { clusterRetryStrategy: (times) => Math.min(times * 200, 2_000) },
  cli: { clusterRetryStrategy: (times) => (times > 3 ? null : times * 200) },
};

function build(topology: RedisTopology, role: keyof typeof CLUSTER_ROLE, options: RedisOptions) {
  switch (topology.kind) {
    case "standalone":
      // A handshake that never ends is made again (ready-guard.ts); a producer's connection is
      // also dropped at its first command unanswered within the timeout.
      return new ReadyGuardedRedis(topology.url, options, { dropOnTimeout: role === "producer" });
    case "sentinel": {
      const { auth } = topology;
      return new RevivingRedis({
        ...options,
        sentinels: topology.sentinels,
        name: topology.name,
        ...(auth.username && { username: auth.username }),
        ...(auth.password && { password: auth.password }),
        ...(auth.tls && { tls: {}, enableTLSForSentinelMode: true }),
        ...(topology.sentinelPassword && { sentinelPassword: topology.sentinelPassword }),
        // After a failover, reconnect to whichever node the sentinels now name as primary.
        failoverDetector: true,
      });
    }
    case "cluster": {
      const { auth } = topology;
      const { enableOfflineQueue, enableAutoPipelining, autoPipeliningIgnoredCommands, ...node } =
        options;
      return new Cluster(topology.nodes, {
        ...CLUSTER_ROLE[role],
        redisOptions: {
          ...node,
          ...(auth.username && { username: auth.username }),
          ...(auth.password && { password: auth.password }),
          ...(auth.tls && { tls: {} }),
        },
      });
    }
  }
}

export function createProducerRedis(topology: RedisTopology): RedisClient {
  return build(topology, "producer", PRODUCER);
}

export function createWorkerRedis(topology: RedisTopology): RedisClient {
  return build(topology, "worker", WORKER);
}

export function createCliRedis(topology: RedisTopology): RedisClient {
  return build(topology, "cli", CLI);
}

/**
 * A new connection like `redis`, with some node options changed (e.g. a probe whose commands time
 * out). On a Cluster the options apply to every node's connection.
 */
export function duplicateWith(redis: RedisClient, options: RedisOptions): RedisClient {
  if (redis instanceof Cluster) {
    const { enableOfflineQueue, ...node } = options;
    return redis.duplicate(undefined, {
      redisOptions: { ...redis.options.redisOptions, ...node },
      ...(enableOfflineQueue !== undefined && { enableOfflineQueue }),
    });
  }
  return redis.duplicate(options);
}

/** True for ioredis's error when a command outlived commandTimeout. */
export const isCommandTimeout = (err: unknown) =>
  err instanceof Error && err.message === COMMAND_TIMED_OUT;

/** Every primary: one node, or each primary of a Cluster (memory checks look at all of them). */
export function primaries(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes("master") : [redis];
}

/** Resolves once the client is ready; the edge starts serving only then. */
export async function waitForReady(redis: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (redis.status === "ready") return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis did not become ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      redis.off("ready", onReady);
    };
    redis.on("ready", onReady);
  });
}

export async function closeRedis(redis: RedisClient): Promise<void> {
  await redis.quit().catch(() => redis.disconnect());
}
