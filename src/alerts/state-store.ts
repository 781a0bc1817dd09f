import type { Result } from "ioredis";
import type { RedisClient } from "../redis/connections.js";
import { alertKeys } from "./keys.js";

// Series states in Redis, updated optimistically: read every state a batch touches (one round
// trip), compute the next states in the process (evaluate-series.ts, pure), then write them in
// one Lua call that checks nothing changed in between (compare-and-set on the exact text read).
// Two workers evaluating the same series at once cannot both fire: the second one's write is
// refused, and it reads and computes again.
//
// The events a batch produced are written by the same call, atomically with the states, into
// the batch's outbox. An evaluation of the same batch that finds the outbox (a redelivered job)
// takes those events as they are instead of evaluating again: the events are never lost between
// the state change and their delivery, and never produced twice.

/** A state hash field: the rule's state key and the series' field in it. */
export interface StateRef {
  ruleId: string;
  field: string;
}

export interface StateWrite extends StateRef {
  /** The exact text read (null: there was none). */
  prev: string | null;
  next: string;
}

export type CommitResult =
  | { ok: true }
  | { ok: false; conflict: true }
  | { ok: false; outbox: string };

// KEYS: outbox, then one state hash per write. ARGV: outbox text ('' for none), state TTL (s),
// then per write: field, previous text ('' for none), next text.
const COMMIT = `
local existing = redis.call('GET', KEYS[1])
if existing then return {2, existing} end
for i = 2, #KEYS do
  local a = 3 + (i - 2) * 3
  if (redis.call('HGET', KEYS[i], ARGV[a]) or '') ~= ARGV[a + 1] then return {0} end
end
for i = 2, #KEYS do
  local a = 3 + (i - 2) * 3
  redis.call('HSET', KEYS[i], ARGV[a], ARGV[a + 2])
  redis.call('EXPIRE', KEYS[i], ARGV[2])
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'EX', 86400) end
return {1}
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomAlertsCommit(...args: (string | number)[]): Result<[number, string?], Context>;
  }
}

/** A series nobody reported on for this long starts afresh. */
const STATE_TTL_S = 30 * 86_400;

export function createStateStore(redis: RedisClient, prefix: string) {
  if (!redis.headroomAlertsCommit) redis.defineCommand("headroomAlertsCommit", { lua: COMMIT });
  const k = alertKeys(prefix);
  return {
    /** The batch's outbox (if a previous evaluation left one) and the states, in one round trip. */
    async read(token: string, refs: StateRef[]) {
      const pipeline = redis.pipeline().get(k.outbox(token));
      for (const r of refs) pipeline.hget(k.state(r.ruleId), r.field);
      const results = (await pipeline.exec()) ?? [];
      const values = results.map(([err, v]) => {
        if (err) throw err;
        return (v as string | null) ?? null;
      });
      return { outbox: values[0] ?? null, states: values.slice(1) };
    },

    async commit(
      token: string,
      writes: StateWrite[],
      outbox: string | null,
    ): Promise<CommitResult> {
      const keys = [k.outbox(token), ...writes.map((w) => k.state(w.ruleId))];
      const args = [
        outbox ?? "",
        STATE_TTL_S,
        ...writes.flatMap((w) => [w.field, w.prev ?? "", w.next]),
      ];
      const [code, existing] = await redis.headroomAlertsCommit(keys.length, ...keys, ...args);
      if (code === 1) return { ok: true };
      if (code === 2) return { ok: false, outbox: existing as string };
      return { ok: false, conflict: true };
    },

    /** The batch's events are stored and queued: a later evaluation of it has nothing to send. */
    async clearOutbox(token: string) {
      await redis.del(k.outbox(token));
    },
  };
}

export type StateStore = ReturnType<typeof createStateStore>;
