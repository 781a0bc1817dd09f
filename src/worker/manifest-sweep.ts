import type { RedisClient } from "../redis/connections.js";
import type { ManifestStore } from "./manifest-store.js";

/**
 * Jobs that still own a manifest but will never be delivered with it again are released, so
 * their manifests do not stay in Redis for ever: jobs that no longer exist (completed by a worker
 * that died before it released them, or expired from the failed set) and failed jobs (`dlq
 * replay` inserts a replayed job's own rows, without its manifest). A job waiting, active or
 * delayed keeps its manifest: it may still be delivered. Returns how many jobs still hold one.
 */
export async function sweepManifests(
  redis: RedisClient,
  keyPrefix: string,
  store: ManifestStore,
): Promise<number> {
  let cursor = "0";
  let held = 0;
  do {
    const [next, flat] = await redis.hscan(`${keyPrefix}:manifest-owners`, cursor, "COUNT", 500);
    cursor = next;
    const ids = flat.filter((_, i) => i % 2 === 0);
    if (ids.length === 0) continue;
    const pipeline = redis.pipeline();
    for (const id of ids) {
      pipeline.exists(`${keyPrefix}:${id}`);
      pipeline.zscore(`${keyPrefix}:failed`, id);
    }
    const results = (await pipeline.exec()) ?? [];
    // Only an answer counts: a command that failed (a failover under way) releases nothing.
    const answer = (k: number) => {
      const [err, value] = results[k] ?? [new Error("no answer"), undefined];
      return err ? undefined : value;
    };
    const done = ids.filter((_, i) => {
      const exists = answer(2 * i);
      const failedAt = answer(2 * i + 1);
      return exists === 0 || (failedAt !== undefined && failedAt !== null);
    });
    if (done.length > 0) await store.release(done);
    held += ids.length - done.length;
  } while (cursor !== "0");
  return held;
}
