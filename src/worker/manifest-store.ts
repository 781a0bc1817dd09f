import type { Result } from "ioredis";
import { rowsJson } from "../clickhouse/rows-json.js";
import type { RedisClient } from "../redis/connections.js";
import type { ReportRow } from "../report/report-schema.js";
import { ROW_SHAPES, type RowShapes } from "../report/row-shapes.js";

// Exactly once by construction: every insert of a batch is byte-identical to its first attempt,
// so ClickHouse's insert deduplication (same token, same data) drops every repeat, in `reports`
// and in every materialized view.
//
// Before a worker inserts a batch, it records the batch's manifest in Redis (its deduplication
// token, its rows in order and which job each came from) atomically with claiming the jobs: the
// claim succeeds only if the worker still holds every job's BullMQ lock and no job belongs to a
// manifest yet. Whoever later holds one of those jobs (a redelivery after a stall or a crash, a
// replay) re-inserts exactly that manifest with the same token, then completes the job. A job
// leaves its manifest only once the Redis holding the manifest holds the job completed (so it can
// never be delivered again); the last one out deletes the manifest. A frozen worker that wakes
// up finds its locks gone and claims nothing; one that wakes mid-insert sends the same bytes with
// the same token, and ClickHouse keeps one copy. This is the exactly-once scheme of ClickHouse's
// Kafka Connect sink, with BullMQ's locks in place of Kafka's offsets. Every key shares the queue
// prefix's hash tag, so each script touches one Redis Cluster slot.

export interface HeldJob {
  id: string;
  /** The BullMQ lock token this worker holds the job with. */
  lockToken: string;
}

export interface Manifest {
  token: string;
  /** In the current row shape; stored with its version, and read back in the current shape. */
  rows: ReportRow[];
  /** For each job of the batch, in order: its id and how many of `rows` are its. */
  jobs: [id: string, rows: number][];
  /**
   * `rows` as rowsJson encodes them (src/clickhouse/rows-json.ts), when this worker made the
   * manifest: stored and inserted as they are, so the rows are encoded once.
   */
  json?: Buffer;
}

export type ClaimResult =
  | { claimed: true }
  | {
      claimed: false;
      /** Jobs whose lock this worker no longer holds: someone else has them now. */
      lost: string[];
      /** Jobs already in a manifest: job id → the manifest's token. */
      owned: Map<string, string>;
    };

/** Where manifests live: RedisClient in production; a unit test may keep them in memory. */
export interface ManifestStore {
  /** Records `manifest` and makes it the owner of its jobs, all or nothing. */
  claim(manifest: Manifest, held: HeldJob[]): Promise<ClaimResult>;
  /** The owners of these jobs, for those that have one: job id → token. */
  owners(jobIds: string[]): Promise<Map<string, string>>;
  /** A manifest exactly as claimed, or null once it is gone. */
  get(token: string): Promise<Manifest | null>;
  /** Which of these jobs this worker no longer holds (their lock is gone or someone else's). */
  lost(held: HeldJob[]): Promise<string[]>;
  /**
   * These jobs are done (completed, or failed): they leave their manifests, and empty manifests
   * are deleted — but only where Redis holds them done. A job that this Redis still has in the
   * queue keeps its manifest: its completion was on a primary that failed over before passing
   * it on, and the promoted replica hands the job out again, to go in with its manifest.
   */
  release(jobIds: string[]): Promise<void>;
  /**
   * With REDIS_ACK_REPLICAS: once the replicas hold the manifest `token` (claimed or read by this
   * worker), which of `jobIds` it no longer owns — a failover to a replica that never had it
   * takes the claim away. Throws, to be retried, while too few replicas hold it.
   */
  replicated(token: string, jobIds: string[]): Promise<string[]>;
}

/** Too few replicas confirmed a manifest in time: not yet safe to insert it. */
export class ReplicationError extends Error {
  override name = "ReplicationError";
}

export interface ReplicationOptions {
  ackReplicas: number;
  ackTimeoutMs: number;
}

// KEYS: owners hash, manifest key, then one lock key per job.
// ARGV: token, rows JSON, jobs JSON, then (job id, lock token) per job.
const CLAIM = `
local lost, owned = {}, {}
for i = 3, #KEYS do
  local id, lockToken = ARGV[2 + (i - 2) * 2], ARGV[3 + (i - 2) * 2]
  if redis.call('GET', KEYS[i]) ~= lockToken then
    lost[#lost + 1] = id
  else
    local owner = redis.call('HGET', KEYS[1], id)
    if owner then owned[#owned + 1] = id; owned[#owned + 1] = owner end
  end
end
if #lost > 0 or #owned > 0 then return {lost, owned} end
redis.call('HSET', KEYS[2], 'rows', ARGV[2], 'jobs', ARGV[3], 'left', #KEYS - 2)
for i = 3, #KEYS do redis.call('HSET', KEYS[1], ARGV[2 + (i - 2) * 2], ARGV[1]) end
return 1
`;

// A job leaves its manifest only if this Redis holds it done: its job hash gone (completed with
// removeOnComplete, or removed) or in the completed or failed set. The worker learns of a
// completion from one primary, but after a failover its release runs on the promoted replica,
// which may never have had the completion and still queues the job; released there, the job
// would come back with no manifest and go in a second time under a new token.
// KEYS: owners hash, completed set, failed set, then (manifest key, job key) per job.
// ARGV: (job id, token) per job.
const RELEASE = `
for i = 1, #ARGV / 2 do
  local id, token = ARGV[2 * i - 1], ARGV[2 * i]
  local manifest, job = KEYS[2 + 2 * i], KEYS[3 + 2 * i]
  local done = redis.call('EXISTS', job) == 0
    or redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[3], id)
  if done and redis.call('HGET', KEYS[1], id) == token then
    redis.call('HDEL', KEYS[1], id)
    if redis.call('HINCRBY', manifest, 'left', -1) <= 0 then redis.call('DEL', manifest) end
  end
end
return 1
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    headroomClaimManifest(
      ...args: (string | number | Buffer)[]
    ): Result<1 | [string[], string[]], Context>;
    headroomReleaseManifests(...args: (string | number)[]): Result<1, Context>;
  }
}

// A manifest's rows: shape 1 as a bare array, as releases before row versions wrote and read
// them; a later shape as `{v, rows}`. A manifest an older release recorded is re-inserted in the
// current shape under its token, which is what ClickHouse deduplicates the repeat by.
function storedRows(shapes: RowShapes, rows: ReportRow[], json = rowsJson(rows)): Buffer {
  if (shapes.current === 1) return json;
  // JSON.stringify({ v, rows }), byte for byte.
  return Buffer.concat([Buffer.from(`{"v":${shapes.current},"rows":`), json, Buffer.from("}")]);
}
function readRows(shapes: RowShapes, stored: ReportRow[] | { v: number; rows: ReportRow[] }) {
  return Array.isArray(stored) ? shapes.upgrade(1, stored) : shapes.upgrade(stored.v, stored.rows);
}

/** `keyPrefix` is the queue's key prefix, e.g. `{headroom}:reports` (BullMQ's `prefix:name`). */
export function createRedisManifestStore(
  redis: RedisClient,
  keyPrefix: string,
  replication: ReplicationOptions = { ackReplicas: 0, ackTimeoutMs: 1_000 },
  shapes: RowShapes = ROW_SHAPES,
): ManifestStore {
  if (!redis.headroomClaimManifest) {
    redis.defineCommand("headroomClaimManifest", { lua: CLAIM });
    redis.defineCommand("headroomReleaseManifests", { lua: RELEASE });
  }
  const ownersKey = `${keyPrefix}:manifest-owners`;
  const manifestKey = (token: string) => `${keyPrefix}:manifest:${token}`;
  // BullMQ keeps a job's lock at `prefix:name:<id>:lock`, holding the worker's lock token.
  const lockKey = (id: string) => `${keyPrefix}:${id}:lock`;
  const jobKey = (id: string) => `${keyPrefix}:${id}`;

  return {
    async claim(manifest, held) {
      const keys = [ownersKey, manifestKey(manifest.token), ...held.map((j) => lockKey(j.id))];
      const args = [
        manifest.token,
        storedRows(shapes, manifest.rows, manifest.json),
        JSON.stringify(manifest.jobs),
        ...held.flatMap((j) => [j.id, j.lockToken]),
      ];
      const res = await redis.headroomClaimManifest(keys.length, ...keys, ...args);
      if (res === 1) return { claimed: true };
      const [lost, ownedFlat] = res;
      const owned = new Map<string, string>();
      for (let i = 0; i < ownedFlat.length; i += 2)
        owned.set(ownedFlat[i] as string, ownedFlat[i + 1] as string);
      return { claimed: false, lost, owned };
    },

    async owners(jobIds) {
      const owners = new Map<string, string>();
      if (jobIds.length === 0) return owners;
      const tokens = await redis.hmget(ownersKey, ...jobIds);
      jobIds.forEach((id, i) => {
        const t = tokens[i];
        if (t) owners.set(id, t);
      });
      return owners;
    },

    async get(token) {
      const [rows, jobs] = await redis.hmget(manifestKey(token), "rows", "jobs");
      if (!rows || !jobs) return null;
      return { token, rows: readRows(shapes, JSON.parse(rows)), jobs: JSON.parse(jobs) };
    },

    async lost(held) {
      if (held.length === 0) return [];
      // One slot (the hash tag), so one MGET also on a Redis Cluster.
      const tokens = await redis.mget(...held.map((j) => lockKey(j.id)));
      return held.filter((j, i) => tokens[i] !== j.lockToken).map((j) => j.id);
    },

    async replicated(token, jobIds) {
      const { ackReplicas, ackTimeoutMs } = replication;
      if (ackReplicas === 0 || jobIds.length === 0) return [];
      // One pipeline on one connection to the slot's primary: a write of its own so that WAIT
      // covers everything the primary applied (the claim included), WAIT, then the owners as that
      // same primary has them. A failover in between fails the pipeline.
      const results = await redis
        .pipeline()
        .set(`${keyPrefix}:replication-probe`, String(Date.now()))
        .wait(ackReplicas, ackTimeoutMs)
        .hmget(ownersKey, ...jobIds)
        .exec();
      const [[setErr], [waitErr, acked], [ownersErr, owners]] = (results ?? []) as [
        [Error | null, unknown],
        [Error | null, number],
        [Error | null, (string | null)[]],
      ];
      const err = setErr ?? waitErr ?? ownersErr;
      if (err) throw err;
      if (acked < ackReplicas) {
        throw new ReplicationError(
          `${acked} of ${ackReplicas} replicas hold the manifest after ${ackTimeoutMs} ms`,
        );
      }
      return jobIds.filter((_, i) => owners[i] !== token);
    },

    async release(jobIds) {
      const owners = await this.owners(jobIds);
      if (owners.size === 0) return;
      const ids = [...owners.keys()];
      const keys = [
        ownersKey,
        `${keyPrefix}:completed`,
        `${keyPrefix}:failed`,
        ...ids.flatMap((id) => [manifestKey(owners.get(id) as string), jobKey(id)]),
      ];
      await redis.headroomReleaseManifests(
        keys.length,
        ...keys,
        ...ids.flatMap((id) => [id, owners.get(id) as string]),
      );
    },
  };
}
