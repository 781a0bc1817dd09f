import { type ChainableCommander, Cluster } from "ioredis";
import type { RedisClient } from "../../src/redis/connections.js";

// Everything a Redis holds, key by key, for tests that search it for what must be nowhere. One
// pipeline per SCAN page for the types and one for the values, not two round trips a key.

export interface RedisEntry {
  key: string;
  /** A string's own text; any other type's members as JSON; "(type)" for one not read. */
  value: string;
}

const READ: Record<string, (p: ChainableCommander, key: string) => unknown> = {
  string: (p, k) => p.get(k),
  hash: (p, k) => p.hgetall(k),
  list: (p, k) => p.lrange(k, 0, -1),
  set: (p, k) => p.smembers(k),
  zset: (p, k) => p.zrange(k, 0, -1),
  stream: (p, k) => p.xrange(k, "-", "+"),
};

function resultsOf(results: [Error | null, unknown][] | null): unknown[] {
  return (results ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

export async function redisEntries(redis: RedisClient): Promise<RedisEntry[]> {
  // SCAN on a cluster client walks one node: "nowhere" would be a lie.
  if (redis instanceof Cluster) throw new Error("redisEntries reads one server, not a cluster");
  const entries: RedisEntry[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "COUNT", 1000);
    cursor = next;
    if (keys.length === 0) continue;
    const types = resultsOf(await keys.reduce((p, k) => p.type(k), redis.pipeline()).exec());
    const reads = redis.pipeline();
    const read: boolean[] = types.map((type, i) => {
      const reader = READ[String(type)];
      if (reader) reader(reads, keys[i] as string);
      return reader !== undefined;
    });
    const values = resultsOf(await reads.exec());
    let v = 0;
    keys.forEach((key, i) => {
      if (!read[i]) {
        entries.push({ key, value: `(${String(types[i])})` });
        return;
      }
      // A key gone between its TYPE and its read holds nothing.
      const value = values[v++] ?? "";
      entries.push({ key, value: typeof value === "string" ? value : JSON.stringify(value) });
    });
  } while (cursor !== "0");
  return entries;
}

/** Every key and value as one text. */
export async function redisText(redis: RedisClient): Promise<string> {
  return (await redisEntries(redis)).flatMap((e) => [e.key, e.value]).join("\n");
}
