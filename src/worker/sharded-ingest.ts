import type { Config } from "../config.js";
import type { QueueNames } from "../queue/reports-queue.js";
import { knownShards, shardNames } from "../queue/shards.js";
import {
  createIngestWorker,
  type IngestWorker,
  type IngestWorkerDeps,
} from "./create-ingest-worker.js";

// A worker process's consumers: one ingest worker per queue shard (a batch's manifest lives in
// its shard's slot, so batches never mix shards). Unless pinned to some shards (WORKER_SHARDS),
// it also consumes every shard an edge has recorded, looked up again every few seconds: shards
// of an earlier QUEUE_SHARDS are drained, and shards added later are found.

const REFRESH_MS = 5_000;

export interface ShardedIngestDeps extends Omit<IngestWorkerDeps, "shard" | "config"> {
  config: IngestWorkerDeps["config"] & Pick<Config, "QUEUE_SHARDS" | "WORKER_SHARDS">;
  refreshMs?: number;
}

export interface ShardedIngest {
  /** The shards consumed now, by prefix. */
  shards: () => string[];
  workers: () => IngestWorker[];
  start(): void;
  /** Stop taking jobs on every shard, flush what is in hand, ack it, close. */
  close(graceMs?: number): Promise<void>;
}

export function createShardedIngest(deps: ShardedIngestDeps): ShardedIngest {
  const { config, logger } = deps;
  const base = { prefix: config.QUEUE_PREFIX, name: config.QUEUE_NAME };
  const all = shardNames(base, config.QUEUE_SHARDS);
  const pinned = config.WORKER_SHARDS !== undefined;
  const configured = pinned ? (config.WORKER_SHARDS ?? []).flatMap((i) => all[i] ?? []) : all;
  const workers = new Map<string, IngestWorker>();
  let started = false;
  let closed = false;
  let timer: NodeJS.Timeout | null = null;

  function consume(shard: QueueNames) {
    if (closed || workers.has(shard.prefix)) return;
    const worker = createIngestWorker({ ...deps, shard });
    workers.set(shard.prefix, worker);
    if (started) worker.start();
    logger.info({ shard: shard.prefix }, "consuming queue shard");
  }

  async function refresh() {
    try {
      for (const shard of await knownShards(deps.redis, base, configured)) consume(shard);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, "could not look up queue shards");
    }
  }

  for (const shard of configured) consume(shard);

  return {
    shards: () => [...workers.keys()],
    workers: () => [...workers.values()],
    start() {
      started = true;
      for (const worker of workers.values()) worker.start();
      if (pinned) return;
      const loop = () => {
        void refresh().finally(() => {
          if (!closed) timer = setTimeout(loop, deps.refreshMs ?? REFRESH_MS).unref();
        });
      };
      loop();
    },
    async close(graceMs?: number) {
      closed = true;
      if (timer) clearTimeout(timer);
      // A look-up still under way is not waited for (Redis may be away): it consumes nothing now.
      await Promise.all([...workers.values()].map((w) => w.close(graceMs)));
    },
  };
}
