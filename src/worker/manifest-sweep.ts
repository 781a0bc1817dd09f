import type { RedisClient } from "../redis/connections.js";
import type { ManifestStore } from "./manifest-store.js";

/**
 * Jobs that still own a manifest but no longer exist (completed by a worker that died before it
 * released them): released, so their manifests do not stay in Redis for ever. A job that exists
 * (waiting, active, delayed or failed) keeps its manifest: it may still be delivered.
 */
export async function sweepManifests(
  redis: RedisClient,
  keyPrefix: string,
  store: ManifestStore,
): Promise<number> {
  let cursor = "0";
  let released = 0;
  do {
    const [next, flat] = await redis.hscan(`${keyPrefix}:manifest-owners`, cursor, "COUNT", 500);
    cursor = next;
    const ids = flat.filter((_, i) => i % 2 === 0);
    if (ids.length === 0) continue;
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.exists(`${keyPrefix}:${id}`);
    const exists = (await pipeline.exec()) ?? [];
    const gone = ids.filter((_, i) => exists[i]?.[1] === 0);
    if (gone.length > 0) {
      await store.release(gone);
      released += gone.length;
    }
  } while (cursor !== "0");
  return released;
}
