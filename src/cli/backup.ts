import { z } from "zod";
import { alertKeys } from "../alerts/keys.js";
import { declarationKeys } from "../control/declarations-store.js";
import { KEY_STORE_PREFIX } from "../keys/key-store.js";
import { primaries, type RedisClient } from "../redis/connections.js";

// What only Redis holds and no pipeline can rebuild: projects, their keys' hashes and plans, alert
// rules and their webhook signing secrets, declared limits and pools, and the control plane's audit log. (Queued reports are in flight, quota counters and rule
// state restart from zero, and what is stored is in ClickHouse.) A backup is a JSON document of
// those keys, written whole and restored whole (into an empty Redis; see backup-merge.ts for one
// in use).

const FORMAT = "headroom-backup";

const entrySchema = z.discriminatedUnion("type", [
  z.object({ key: z.string(), type: z.literal("hash"), value: z.record(z.string(), z.string()) }),
  z.object({ key: z.string(), type: z.literal("set"), value: z.array(z.string()) }),
  z.object({ key: z.string(), type: z.literal("string"), value: z.string() }),
  // The audit log's sorted sets (src/control/audit.ts): members with their scores (ms).
  z.object({
    key: z.string(),
    type: z.literal("zset"),
    value: z.array(z.object({ member: z.string(), score: z.number() })),
  }),
]);

export const backupSchema = z.object({
  format: z.literal(FORMAT),
  version: z.literal(1),
  created_at: z.string(),
  keys: z.array(entrySchema),
});

export type Backup = z.infer<typeof backupSchema>;
type Entry = z.infer<typeof entrySchema>;

/** SCAN's glob characters, escaped, so a prefix matches only itself. */
const literal = (s: string) => s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/** The patterns of the keys a backup holds: the key store's, and the alerts' (queue prefix). */
export function backupPatterns(queuePrefix: string): string[] {
  const keys = literal(KEY_STORE_PREFIX);
  const alerts = alertKeys(literal(queuePrefix));
  return [
    `${keys}:key:*`,
    `${keys}:key-id:*`,
    `${keys}:key-hashes:*`,
    `${keys}:audit`,
    `${keys}:audit:*`,
    `${keys}:project:*`,
    `${keys}:project-keys:*`,
    `${keys}:projects`,
    alerts.rules("*"),
    alerts.ruleIndex,
    alerts.secrets,
    alerts.removedRules,
    declarationKeys(literal(queuePrefix)).of("*"),
  ];
}

async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  // A Cluster's keys are spread over its primaries: each is scanned.
  for (const node of primaries(redis)) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      for (const k of keys) found.add(k);
    } while (cursor !== "0");
  }
  return [...found];
}

async function readEntry(redis: RedisClient, key: string): Promise<Entry | null> {
  const type = await redis.type(key);
  if (type === "hash") return { key, type, value: await redis.hgetall(key) };
  if (type === "set") return { key, type, value: (await redis.smembers(key)).sort() };
  if (type === "zset") {
    const flat = await redis.zrange(key, 0, -1, "WITHSCORES");
    const value: { member: string; score: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      value.push({ member: flat[i] as string, score: Number(flat[i + 1]) });
    }
    return { key, type, value };
  }
  if (type === "string") {
    const value = await redis.get(key);
    return value === null ? null : { key, type, value };
  }
  return null; // gone since the scan
}

/** How many keys of the kinds a backup holds this Redis has: 0 for an empty one. */
export async function storedKeys(redis: RedisClient, queuePrefix: string): Promise<number> {
  let n = 0;
  for (const pattern of backupPatterns(queuePrefix)) n += (await scanKeys(redis, pattern)).length;
  return n;
}

export async function backupRedis(redis: RedisClient, queuePrefix: string): Promise<Backup> {
  const keys = new Set<string>();
  for (const pattern of backupPatterns(queuePrefix)) {
    for (const k of await scanKeys(redis, pattern)) keys.add(k);
  }
  const entries: Entry[] = [];
  for (const key of [...keys].sort()) {
    const entry = await readEntry(redis, key);
    if (entry) entries.push(entry);
  }
  return { format: FORMAT, version: 1, created_at: new Date().toISOString(), keys: entries };
}

/** A sorted set's members added to what is there (the audit log: entries only add up). */
export async function addZset(
  redis: RedisClient,
  key: string,
  value: { member: string; score: number }[],
) {
  for (let i = 0; i < value.length; i += 500) {
    const args = value.slice(i, i + 500).flatMap((m) => [m.score, m.member]);
    if (args.length > 0) await redis.zadd(key, ...args);
  }
}

/**
 * Writes one key of a backup: hash fields, set and sorted set members are added to what is
 * there (the audit log: the union of both); a string is replaced, or with `keepStrings` kept
 * when Redis has one (a merge: the string here is newer than the backup's).
 */
export async function writeEntry(
  redis: RedisClient,
  entry: Entry,
  opts: { keepStrings?: boolean } = {},
): Promise<void> {
  if (entry.type === "hash") {
    if (Object.keys(entry.value).length > 0) await redis.hset(entry.key, entry.value);
  } else if (entry.type === "set") {
    if (entry.value.length > 0) await redis.sadd(entry.key, ...entry.value);
  } else if (entry.type === "zset") {
    await addZset(redis, entry.key, entry.value);
  } else if (opts.keepStrings) {
    await redis.set(entry.key, entry.value, "NX");
  } else {
    await redis.set(entry.key, entry.value);
  }
}

/**
 * Writes every key of a backup (writeEntry). Into an empty Redis that is the backup as it was
 * taken.
 */
export async function restoreRedis(redis: RedisClient, backup: Backup): Promise<number> {
  for (const entry of backup.keys) await writeEntry(redis, entry);
  return backup.keys.length;
}
