import { answered } from "../lib/answered.js";
import type { ReportsQueue } from "../queue/reports-queue.js";
import { isCommandTimeout, primaries, type RedisClient } from "../redis/connections.js";
import { unavailable } from "./errors.js";

// Backpressure: the edge polls the queue's backlog and Redis memory a few times a second and
// answers 503 while either is over its bound, instead of letting Redis run out of memory. Polling
// keeps the check off the request path; a failed poll counts as "Redis not answering". The poll
// also pings the edge's other connections: one whose commands go unanswered (a Redis restarted
// behind it without resetting it) is replaced, so that it cannot stay dead.

export interface BacklogState {
  redisOk: boolean;
  backlogJobs: number | null;
  memoryRatio: number | null;
  checkedAt: number;
}

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

/** Runs `fn`; if its command went unanswered, the connection may be dead unknowingly: a new one. */
async function renewing<T>(client: RedisClient, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isCommandTimeout(err)) client.disconnect(true);
    throw err;
  }
}

export function createBacklogGate(opts: BacklogOptions) {
  let state: BacklogState = { redisOk: true, backlogJobs: 0, memoryRatio: null, checkedAt: 0 };
  let timer: NodeJS.Timeout | null = null;
  let polling: Promise<void> | null = null;

  async function poll(): Promise<void> {
    try {
      const [counts, memoryRatio] = await Promise.all([
        renewing(opts.redis, () => opts.queue.getJobCounts("wait", "prioritized", "delayed")),
        opts.maxMemoryRatio > 0
          ? renewing(opts.redis, () => highestMemoryRatio(opts.redis))
          : Promise.resolve(null),
        ...(opts.others ?? []).map((other) => renewing(other, () => other.ping())),
      ]);
      const backlogJobs = Object.values(counts).reduce((a, b) => a + b, 0);
      state = { redisOk: true, backlogJobs, memoryRatio, checkedAt: Date.now() };
    } catch {
      state = { redisOk: false, backlogJobs: null, memoryRatio: null, checkedAt: Date.now() };
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
    /** Why the edge should refuse reports now, or null. */
    problem(): string | null {
      if (!state.redisOk) return "redis is not answering";
      if (state.backlogJobs !== null && state.backlogJobs > opts.maxJobs) {
        return `backlog of ${state.backlogJobs} jobs is over its bound of ${opts.maxJobs}`;
      }
      if (
        opts.maxMemoryRatio > 0 &&
        state.memoryRatio !== null &&
        state.memoryRatio > opts.maxMemoryRatio
      ) {
        return "redis memory is over its bound";
      }
      return null;
    },
    check(): void {
      if (this.problem()) {
        throw unavailable();
      }
    },
  };
}

export type BacklogGate = ReturnType<typeof createBacklogGate>;
