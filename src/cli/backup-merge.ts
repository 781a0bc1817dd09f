import { alertKeys } from "../alerts/keys.js";
import { declarationKeys } from "../control/declarations-store.js";
import { KEY_STORE_PREFIX, OVERRIDES } from "../keys/key-store.js";
import type { RedisClient } from "../redis/connections.js";
import { type Backup, writeEntry } from "./backup.js";

// A backup merged into a Redis that is in use: what the backup has and this Redis lacks is
// added, but nothing is loosened. A key revoked here stays revoked, a rule removed here (its
// tombstone) is not brought back, a project whose plan was set here after the backup was
// taken keeps it, and so do declared limits or pools set here. Every entry left out is said.

type Entry = Backup["keys"][number];

export interface MergeResult {
  written: number;
  skipped: string[];
}

/** The hash fields of a rule-keyed hash whose rule was removed (here or before the backup). */
function withoutRemoved(value: Record<string, string>, removed: Set<string>) {
  return Object.fromEntries(Object.entries(value).filter(([id]) => !removed.has(id)));
}

export async function mergeRedis(
  redis: RedisClient,
  backup: Backup,
  queuePrefix: string,
): Promise<MergeResult> {
  const alerts = alertKeys(queuePrefix);
  const keyPrefix = `${KEY_STORE_PREFIX}:key:`;
  const projectPrefix = `${KEY_STORE_PREFIX}:project:`;
  const ruleHashPrefix = alerts.rules("");
  const declaredPrefix = declarationKeys(queuePrefix).of("");
  const takenAt = Date.parse(backup.created_at);
  const skipped: string[] = [];

  // Tombstones only ever add up: this Redis's and the backup's.
  const removedHere = await redis.hgetall(alerts.removedRules);
  const removed = new Set(Object.keys(removedHere));
  for (const e of backup.keys) {
    if (e.key === alerts.removedRules && e.type === "hash") {
      for (const id of Object.keys(e.value)) removed.add(id);
    }
  }

  const write = (entry: Entry) => writeEntry(redis, entry, { keepStrings: true });

  let written = 0;
  for (const entry of backup.keys) {
    if (entry.type === "hash" && entry.key.startsWith(keyPrefix)) {
      const here = await redis.hgetall(entry.key);
      if (here.revoked === "1" && entry.value.revoked !== "1") {
        skipped.push(
          `key ${here.key_id ?? entry.value.key_id}: revoked here (${here.revoked_at ?? "at an unknown time"}), stays revoked`,
        );
        continue;
      }
    } else if (entry.type === "hash" && entry.key.startsWith(projectPrefix)) {
      const here = await redis.hgetall(entry.key);
      if (here.plan !== undefined) {
        const project = entry.key.slice(projectPrefix.length);
        const setAt = here.plan_updated_at ?? here.created_at;
        const changedAfter = setAt === undefined || !(Date.parse(setAt) <= takenAt);
        if (changedAfter) {
          if (!samePlan(here, entry.value)) {
            skipped.push(
              `plan of project ${project}: ${here.plan} set here ${setAt ? `at ${setAt}, after the backup` : "at an unknown time"}; the backup's ${entry.value.plan} not restored`,
            );
          }
          continue;
        }
        // Set before the backup was taken: the backup is the later word, overrides included.
        await redis.multi().del(entry.key).hset(entry.key, entry.value).exec();
        written += 1;
        continue;
      }
    } else if (
      entry.type === "hash" &&
      (entry.key === alerts.ruleIndex ||
        entry.key === alerts.secrets ||
        entry.key.startsWith(ruleHashPrefix))
    ) {
      const kept = withoutRemoved(entry.value, removed);
      if (entry.key === alerts.ruleIndex) {
        for (const id of Object.keys(entry.value)) {
          if (!(id in kept)) {
            skipped.push(
              `alert rule ${id}: removed ${removedHere[id] ? `at ${removedHere[id]}` : "before"}, not brought back`,
            );
          }
        }
      }
      await write({ ...entry, value: kept });
      written += 1;
      continue;
    }
    if (entry.type === "hash" && entry.key.startsWith(declaredPrefix)) {
      // A project's declared limits (or pools) set here are the later word: kept whole.
      const project = entry.key.slice(declaredPrefix.length);
      for (const [field, value] of Object.entries(entry.value)) {
        const kept = await redis.hsetnx(entry.key, field, value);
        if (kept === 0 && (await redis.hget(entry.key, field)) !== value) {
          skipped.push(
            `declared ${field} of project ${project}: set here; the backup's not restored`,
          );
        }
      }
      written += 1;
      continue;
    }
    await write(entry);
    written += 1;
  }
  return { written, skipped };
}

/** The plan and its overrides, as stored in a project's hash. */
function samePlan(a: Record<string, string>, b: Record<string, string>): boolean {
  return ["plan", ...OVERRIDES].every((f) => a[f] === b[f]);
}
