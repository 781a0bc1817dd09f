import { randomBytes } from "node:crypto";
import type { Result } from "ioredis";
import type { RedisClient } from "../redis/connections.js";

// Client-chosen report ids, so that a client may send a batch again without storing it twice.
// The rollups count every row inserted, so a repeat has to be stopped before it is enqueued: each
// id is claimed in Redis (SET NX, per project) before its report takes any limit, and the claim
// settles with the enqueue.
//
//   pending  "p:<token>", for PENDING_MS: a request is enqueuing it. A repeat meanwhile (a retry
//            racing the first send) is told to try again, not that the report is stored: the
//            first send may yet fail. If the edge dies here, the claim lapses and a retry may
//            send it (a job Redis acknowledged just before the edge died is then stored twice;
//            `reports` still shows it once, by its report id, but rollups count it twice).
//   stored   "s", for STORED_MS (24 h): the job holding it was acknowledged, or may have been
//            (the same cases in which the quota unit is kept). A repeat is answered `duplicate`.
//   released the enqueue surely failed, or a limit refused the report: the claim is deleted, and
//            a retry is a first send.
//
// The id is also the report's report_id, so a job a worker inserts twice (after a SIGKILL) is
// dropped by ClickHouse's insert deduplication like any other, and `reports` (ReplacingMergeTree
// by report_id) backs the claim up.

/** How long a claim waits for its enqueue: longer than any Redis command may take. */
export const PENDING_MS = 60_000;
export const STORED_MS = 24 * 60 * 60 * 1000;

export type ClaimState = "new" | "stored" | "pending";

const CLAIM = `
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, 'p:' .. ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i] = 1
  elseif redis.call('GET', key) == 's' then
    out[i] = 0
  else
    out[i] = 2
  end
end
return out
`;

// Only the claimer's own pending claims settle: one that lapsed and was claimed again is not ours.
const SETTLE = `
local mine = 'p:' .. ARGV[1]
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == mine then
    if ARGV[2] == 's' then redis.call('SET', key, 's', 'PX', ARGV[3]) else redis.call('DEL', key) end
  end
end
return 0
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomClaimIds(...args: (string | number)[]): Result<number[], Context>;
    headroomSettleIds(...args: (string | number)[]): Result<number, Context>;
  }
}

const STATES: ClaimState[] = ["stored", "new", "pending"];

export function createReportIds(redis: RedisClient, prefix: string) {
  let defined = false;
  const define = () => {
    if (defined) return;
    defined = true;
    redis.defineCommand("headroomClaimIds", { lua: CLAIM });
    redis.defineCommand("headroomSettleIds", { lua: SETTLE });
  };
  // One hash tag per project: a batch's keys share a Cluster slot, so one script covers them.
  const keys = (projectId: string, ids: string[]) =>
    ids.map((id) => `${prefix}:ids:{${projectId}}:${id}`);

  return {
    /** Claims `ids` (distinct) of a project; `token` settles the new ones later. */
    async claim(
      projectId: string,
      ids: string[],
    ): Promise<{ states: ClaimState[]; token: string }> {
      const token = randomBytes(12).toString("hex");
      if (ids.length === 0) return { states: [], token };
      define();
      const k = keys(projectId, ids);
      const out = await redis.headroomClaimIds(k.length, ...k, token, PENDING_MS);
      return { states: out.map((n) => STATES[n] as ClaimState), token };
    },

    /** Marks claims stored (their job was acknowledged) or releases them. */
    async settle(
      projectId: string,
      ids: string[],
      token: string,
      outcome: "stored" | "released",
    ): Promise<void> {
      if (ids.length === 0) return;
      define();
      const k = keys(projectId, ids);
      await redis.headroomSettleIds(
        k.length,
        ...k,
        token,
        outcome === "stored" ? "s" : "d",
        STORED_MS,
      );
    },
  };
}

export type ReportIds = ReturnType<typeof createReportIds>;
