import { type UnavailableReason, unavailable } from "../http/errors.js";
import { answered } from "../lib/answered.js";
import type { ReportsQueue } from "../queue/reports-queue.js";
import { isCommandTimeout, primaries, type RedisClient } from "../redis/connections.js";

// Backpressure: the edge polls the queue's backlog and Redis memory a few times a second and
// answers 503 while either is over its bound, instead of letting Redis run out of memory. Polling
// keeps the check off the request path; a failed poll counts as "Redis not answering". The poll
// also pings the edge's other connections: one whose commands go unanswered (a Redis restarted
// behind it without resetting it) is replaced, so that it cannot stay dead.

export interface BacklogState {
  redisOk: boolean;
  backlogJobs: number | null;
  memoryRatio: number | null;
  /**
   * With REDIS_ACK_REPLICAS: primaries (`host:port`) with fewer connected replicas. Their jobs'
   * batches wait in Redis, held from ClickHouse, until a replica is back (manifest-delivery.ts).
   */
  replicasShort: string[];
  checkedAt: number;
}

/** Warned once when the memory gate is on but Redis has no maxmemory (it then checks nothing). */
export type GateWarning = (message: string) => void;

export interface BacklogOptions {
  /** The connection the queue writes on. */
  redis: RedisClient;
  /** The edge's other connections, kept alive by the same poll. */
  others?: RedisClient[];
  /** The queue's job counts (every shard's). */
  queue: Pick<ReportsQueue, "getJobCounts">;
  maxJobs: number;
  maxMemoryRatio: number;
  intervalMs: number;
  /** REDIS_ACK_REPLICAS: primaries with fewer replicas are reported (not a reason to refuse). */
  ackReplicas?: number;
  onWarning?: GateWarning;
}

function parseMemory(info: string): number | null {
  const used = /used_memory:(\d+)/.exec(info)?.[1];
  const max = /maxmemory:(\d+)/.exec(info)?.[1];
  if (!used || !max || Number(max) === 0) return null;
  return Number(used) / Number(max);
}

/**
 * The fullest primary that answers decides: on a Cluster, any primary running out stops intake.
 * One that does not answer (failing over) is the job writer's business, not a reason to stop.
 */
async function highestMemoryRatio(redis: RedisClient): Promise<number | null> {
  const ratios = await answered(
    primaries(redis).map(async (r) => parseMemory(await r.info("memory"))),
  );
  const known = ratios.filter((r): r is number => r !== null);
  return known.length === 0 ? null : Math.max(...known);
}

/** Primaries that answer with fewer than `needed` connected replicas, as `host:port`. */
async function primariesShortOfReplicas(redis: RedisClient, needed: number): Promise<string[]> {
  const nodes = primaries(redis);
  const counts = await answered(
    nodes.map(async (r) => Number(/connected_slaves:(\d+)/.exec(await r.info("replication"))?.[1])),
  );
  return nodes
    .filter((_, i) => {
      const n = counts[i];
      return n !== null && n !== undefined && !(n >= needed);
    })
    .map((r) => `${r.options.host}:${r.options.port}`);
}

/** Runs `fn`; if its command went unanswered, the connection may be dead unknowingly: a new one. */
async function renewing<T>(client: RedisClient, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isCommandTimeout(err)) client.disconnect(true);
    throw err;
  }
}

export interface BacklogGate {
  start(): Promise<void>;
  stop(): Promise<void>;
  state: () => BacklogState;
  /** Whether Redis memory can close intake now: enabled, and Redis has a maxmemory. */
  memoryGateOn: () => boolean;
  maxJobs: number;
  /** Why the edge should refuse reports now, or null. */
  problem(): string | null;
  refusal(): {
    reason: UnavailableReason;
    message: string;
  } | null;
  check(): void;
}

export function createBacklogGate(opts: BacklogOptions): BacklogGate {
  let state: BacklogState = {
    redisOk: true,
    backlogJobs: 0,
    memoryRatio: null,
    replicasShort: [],
    checkedAt: 0,
  };
  const ackReplicas = opts.ackReplicas ?? 0;
  let timer: NodeJS.Timeout | null = null;
  let polling: Promise<void> | null = null;
  let warned = false;

  async function poll(): Promise<void> {
    try {
      const [counts, memoryRatio, replicasShort] = await Promise.all([
        renewing(opts.redis, () => opts.queue.getJobCounts("wait", "prioritized", "delayed")),
        opts.maxMemoryRatio > 0
          ? renewing(opts.redis, () => highestMemoryRatio(opts.redis))
          : Promise.resolve(null),
        ackReplicas > 0
          ? renewing(opts.redis, () => primariesShortOfReplicas(opts.redis, ackReplicas))
          : Promise.resolve([]),
        ...(opts.others ?? []).map((other) => renewing(other, () => other.ping())),
      ]);
      const backlogJobs = Object.values(counts).reduce((a, b) => a + b, 0);
      if (replicasShort.length > 0 && state.replicasShort.join() !== replicasShort.join()) {
        opts.onWarning?.(
          `redis primaries with fewer than REDIS_ACK_REPLICAS=${ackReplicas} replicas: ${replicasShort.join(", ")}; reports acknowledged there wait in Redis, not yet in ClickHouse, until a replica is back`,
        );
      }
      state = { redisOk: true, backlogJobs, memoryRatio, replicasShort, checkedAt: Date.now() };
      if (opts.maxMemoryRatio > 0 && memoryRatio === null && !warned) {
        warned = true;
        opts.onWarning?.(
          "redis has no maxmemory: the memory gate (REDIS_MEMORY_MAX_RATIO) checks nothing; set maxmemory and maxmemory-policy noeviction",
        );
      }
    } catch {
      state = {
        redisOk: false,
        backlogJobs: null,
        memoryRatio: null,
        replicasShort: state.replicasShort,
        checkedAt: Date.now(),
      };
    }
  }

  const schedule = () => {
    timer = setTimeout(() => {
      polling = poll().finally(schedule);
    }, opts.intervalMs);
    timer.unref();
  };

  return {
    async start() {
      await poll();
      schedule();
    },
    async stop() {
      if (timer) clearTimeout(timer);
      timer = null;
      await polling;
    },
    state: () => state,
    memoryGateOn: () => opts.maxMemoryRatio > 0 && state.memoryRatio !== null,
    maxJobs: opts.maxJobs,
    problem(): string | null {
      return this.refusal()?.message ?? null;
    },
    refusal(): { reason: UnavailableReason; message: string } | null {
      if (!state.redisOk) return { reason: "redis", message: "redis is not answering" };
      if (state.backlogJobs !== null && state.backlogJobs > opts.maxJobs) {
        return {
          reason: "backlog",
          message: `backlog of ${state.backlogJobs} jobs is over its bound of ${opts.maxJobs}`,
        };
      }
      if (
        opts.maxMemoryRatio > 0 &&
        state.memoryRatio !== null &&
        state.memoryRatio > opts.maxMemoryRatio
      ) {
        return { reason: "redis_memory", message: "redis memory is over its bound" };
      }
      return null;
    },
    check(): void {
      const refusal = this.refusal();
      if (refusal) throw unavailable(undefined, refusal.reason);
    },
  };
}
