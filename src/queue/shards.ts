import type { RedisClient } from "../redis/connections.js";
import { hashTag, keySlot, SLOTS } from "../redis/key-slot.js";
import type { QueueNames } from "./reports-queue.js";

// Sharded queues. One BullMQ queue lives in one Cluster slot (its prefix's hash tag), so one
// primary carries all of it. With QUEUE_SHARDS=N the reports are spread over N queues whose hash
// tags fall in the N equal ranges of the slot space — the ranges `redis-cli --cluster create`
// gives N primaries — so each primary carries one shard. A single shard is the plain
// QUEUE_PREFIX, as before shards existed.
//
// Edges record every shard they write to in a set beside the base queue; workers consume their
// configured shards and every recorded one, so changing N on a running system leaves no job
// behind: old shards are drained.

/** `{headroom}` → `{headroom-<k>}`, for the first k whose slot is in shard i's range. */
function shardPrefix(base: string, shard: number, shards: number): string {
  const tag = hashTag(base);
  const from = Math.floor((shard * SLOTS) / shards);
  const to = Math.floor(((shard + 1) * SLOTS) / shards);
  for (let k = 0; ; k++) {
    const candidate = base.replace(`{${tag}}`, `{${tag}-${k}}`);
    const slot = keySlot(candidate);
    if (slot >= from && slot < to) return candidate;
  }
}

export function shardNames(base: QueueNames, shards: number): QueueNames[] {
  if (shards === 1) return [base];
  return Array.from({ length: shards }, (_, i) => ({
    prefix: shardPrefix(base.prefix, i, shards),
    name: base.name,
  }));
}

const registryKey = (base: QueueNames) => `${base.prefix}:${base.name}:shards`;

/** Records the shards an edge writes to (before it writes to them). */
export async function registerShards(
  redis: RedisClient,
  base: QueueNames,
  shards: QueueNames[],
): Promise<void> {
  await redis.sadd(registryKey(base), ...shards.map((s) => s.prefix));
}

/** Every shard any edge has written to, and the given ones. */
export async function knownShards(
  redis: RedisClient,
  base: QueueNames,
  configured: QueueNames[],
): Promise<QueueNames[]> {
  const recorded = await redis.smembers(registryKey(base));
  const prefixes = new Set([...configured.map((s) => s.prefix), ...recorded.sort()]);
  return [...prefixes].map((prefix) => ({ prefix, name: base.name }));
}
