import { Redis } from "ioredis";

// Asking a local Redis (server or sentinel) how it is, for the topology harnesses: one short-lived
// connection per question, so a killed or restarted server never leaves a client retrying.

/** Runs `fn` on a fresh connection to `url` that never retries, and closes it. */
export async function withRedis<T>(url: string, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1_000,
    commandTimeout: 2_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/** `INFO <section>` as a map of its fields. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && !line.startsWith("#")) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

export const info = (redis: Redis, section: string) =>
  redis.info(section).then((text) => parseInfo(text));

/** `ROLE`'s first field: "master", "slave" or "sentinel". */
export async function role(redis: Redis): Promise<string> {
  const reply = (await redis.call("ROLE")) as unknown[];
  return String(reply[0]);
}

/** Throws unless the server at `url` is a replica whose link to its primary is up. */
export async function assertReplicaLinked(url: string, primaryPort?: number): Promise<void> {
  const replication = await withRedis(url, (redis) => info(redis, "replication"));
  const where = new URL(url).port;
  if (replication.get("role") !== "slave") throw new Error(`${where} is not a replica`);
  if (primaryPort !== undefined && replication.get("master_port") !== String(primaryPort)) {
    throw new Error(`${where} replicates ${replication.get("master_port")}, not ${primaryPort}`);
  }
  if (replication.get("master_link_status") !== "up") {
    throw new Error(`${where}: link to its primary is ${replication.get("master_link_status")}`);
  }
}
