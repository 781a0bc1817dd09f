import type { Result } from "ioredis";
import type { JobPlace } from "../queue/id-jobs.js";
import type { RedisClient } from "../redis/connections.js";

// Client-chosen report ids, so that a client may send a batch again without storing it twice.
// The rollups count every row inserted, so a repeat has to be stopped before it is enqueued: each
// id is claimed in Redis (SET NX, per project) before its report takes any limit. A request's
// reports with ids go in one job of their own, whose place (shard and token, id-jobs.ts) the
// claim names, so that what became of the job can always be found out later:
//
//   pending  "p:<token>:<prefix>": a request is enqueuing it. A repeat within REPORT_ID_PENDING_MS (a retry
//            racing the first send) is told to try again. After that the request is taken for
//            dead, and the claim is settled as an unknown one.
//   unknown  "u:<token>:<prefix>": no answer came for the job's write. A repeat settles it: the
//            job's write record (or a fence that stops a late write, id-jobs.ts) says whether it
//            was written; if so the repeat is a duplicate, if not the repeat takes the claim.
//   stored   "s": the job holding it was acknowledged. A repeat is answered `duplicate`.
//   released the write surely failed, or a limit refused the report: the claim is deleted, and
//            a retry is a first send.
//
// So `duplicate` is answered only for an id whose job is known to be written. The id is also
// the report's report_id, so a job a worker inserts twice (after a SIGKILL) is dropped by
// ClickHouse's insert deduplication like any other.

export const STORED_MS = 24 * 60 * 60 * 1000;

export type ClaimState =
  | { state: "new" | "stored" | "pending" }
  /** `seen`: the claim's value, which a settle of it must still find. */
  | { state: "unknown"; seen: string; job: Omit<JobPlace, "shard"> };

// A pending claim lives STORED_MS longer than REPORT_ID_PENDING_MS, so that one whose request died is
// still there to be settled; it is young while its TTL is over STORED_MS.
const CLAIM = `
local mine = 'p:' .. ARGV[1] .. ':' .. ARGV[2]
local stored = tonumber(ARGV[4])
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, mine, 'NX', 'PX', tonumber(ARGV[3]) + stored) then
    out[i] = 1
  else
    local v = redis.call('GET', key)
    if v == 's' then
      out[i] = 0
    elseif not v or (string.sub(v, 1, 2) == 'p:' and redis.call('PTTL', key) > stored) then
      out[i] = 2
    else
      out[i] = v
    end
  end
end
return out
`;

// Only the claimer's own pending claims settle: one that was settled by a repeat is not ours.
const SETTLE = `
local mine = 'p:' .. ARGV[1] .. ':' .. ARGV[2]
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == mine then
    if ARGV[3] == 's' then
      redis.call('SET', key, 's', 'PX', ARGV[4])
    elseif ARGV[3] == 'u' then
      redis.call('SET', key, 'u:' .. ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[4])
    else
      redis.call('DEL', key)
    end
  end
end
return 0
`;

// A repeat's settling of an unknown claim: only if it is still what the repeat saw.
const RESOLVE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomClaimIds(...args: (string | number)[]): Result<(number | string)[], Context>;
    headroomSettleIds(...args: (string | number)[]): Result<number, Context>;
    headroomResolveId(...args: (string | number)[]): Result<number, Context>;
  }
}

const STATES = ["stored", "new", "pending"] as const;

/** "p:<token>:<prefix>" or "u:<token>:<prefix>" → its job (a prefix may hold colons). */
function jobOf(value: string): Omit<JobPlace, "shard"> {
  const at = value.indexOf(":", 2);
  return { token: value.slice(2, at), prefix: value.slice(at + 1) };
}

export interface ReportIds {
  /** Claims `ids` (distinct) of a project for the job at `place`. */
  claim(projectId: string, ids: string[], place: JobPlace): Promise<ClaimState[]>;
  /**
   * Settles an unknown claim that still reads `seen`: stored (its job was written), or
   * taken for the job at `place` (it was not). False when another request settled it first.
   */
  resolve(projectId: string, id: string, seen: string, to: "stored" | JobPlace): Promise<boolean>;
  /** Settles the claims the job at `place` held: stored, unknown (no answer) or released. */
  settle(
    projectId: string,
    ids: string[],
    place: JobPlace,
    outcome: "stored" | "unknown" | "released",
  ): Promise<void>;
}

/** `pendingMs`: REPORT_ID_PENDING_MS, how long a claim waits for its job's write. */
export function createReportIds(redis: RedisClient, prefix: string, pendingMs: number): ReportIds {
  // Defined now, before any request: defined at first use, under concurrent requests, an
  // auto-pipeline begun before the definition made ioredis crash the edge ("results[i] is not
  // iterable", ioredis#1931; seen by the bench's OTLP phase on a fresh edge).
  redis.defineCommand("headroomClaimIds", { lua: CLAIM });
  redis.defineCommand("headroomSettleIds", { lua: SETTLE });
  redis.defineCommand("headroomResolveId", { lua: RESOLVE, numberOfKeys: 1 });
  // One hash tag per project: a batch's keys share a Cluster slot, so one script covers them.
  const keys = (projectId: string, ids: string[]) =>
    ids.map((id) => `${prefix}:ids:{${projectId}}:${id}`);

  return {
    async claim(projectId: string, ids: string[], place: JobPlace): Promise<ClaimState[]> {
      if (ids.length === 0) return [];
      const k = keys(projectId, ids);
      const out = await redis.headroomClaimIds(
        k.length,
        ...k,
        place.token,
        place.prefix,
        pendingMs,
        STORED_MS,
      );
      return out.map((n) =>
        typeof n === "number"
          ? { state: STATES[n] as "new" }
          : { state: "unknown", seen: n, job: jobOf(n) },
      );
    },

    async resolve(
      projectId: string,
      id: string,
      seen: string,
      to: "stored" | JobPlace,
    ): Promise<boolean> {
      const [key] = keys(projectId, [id]) as [string];
      const value = to === "stored" ? "s" : `p:${to.token}:${to.prefix}`;
      const ttl = to === "stored" ? STORED_MS : pendingMs + STORED_MS;
      return (await redis.headroomResolveId(key, seen, value, ttl)) === 1;
    },

    async settle(
      projectId: string,
      ids: string[],
      place: JobPlace,
      outcome: "stored" | "unknown" | "released",
    ): Promise<void> {
      if (ids.length === 0) return;
      const k = keys(projectId, ids);
      await redis.headroomSettleIds(
        k.length,
        ...k,
        place.token,
        place.prefix,
        outcome === "stored" ? "s" : outcome === "unknown" ? "u" : "d",
        STORED_MS,
      );
    },
  };
}
