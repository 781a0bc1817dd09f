import type { Redis } from "ioredis";
import type { QueueNames } from "../src/queue/reports-queue.js";

// The reports queues that exist in the benchmark's Redis, found by their BullMQ keys. With
// QUEUE_SHARDS the edges spread jobs over several queues whose names the service derives (each
// shard's hash tag on a slot of its own); the benchmark finds them rather than knowing the rule,
// so that its backlog, pause and resume cover every shard.

/** BullMQ's per-queue keys: `<prefix>:<name>:meta` (settings) and `:id` (job id counter). */
const QUEUE_KEY = /^(.+):([^:]+):(?:meta|id)$/;

/**
 * The queues among `keys` whose prefix starts like `base.prefix` without its closing brace
 * ("{bench" for "{bench}") and whose name starts with `base.name`: "{bench}:reports",
 * "{bench-2}:reports", "{bench}:reports-2" all count. Sorted, each once.
 */
export function queuesFromKeys(keys: string[], base: QueueNames): QueueNames[] {
  const stem = base.prefix.replace(/\}$/, "");
  const found = new Map<string, QueueNames>();
  for (const key of keys) {
    const m = QUEUE_KEY.exec(key);
    if (!m) continue;
    const [, prefix = "", name = ""] = m;
    if (prefix.startsWith(stem) && name.startsWith(base.name)) {
      found.set(`${prefix}:${name}`, { prefix, name });
    }
  }
  return [...found.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, q]) => q);
}

export async function discoverQueues(redis: Redis, base: QueueNames): Promise<QueueNames[]> {
  const keys: string[] = [];
  for (const pattern of ["*:meta", "*:id"]) {
    let cursor = "0";
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1_000);
      keys.push(...batch);
      cursor = next;
    } while (cursor !== "0");
  }
  return queuesFromKeys(keys, base);
}
