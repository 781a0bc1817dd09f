import { ReplyError } from "ioredis";
import type { RedisClient } from "../redis/connections.js";
import { waitForReplicas } from "../redis/replicas.js";
import type { ReportRow } from "../report/report-schema.js";
import { EnqueueError } from "./enqueue-error.js";
import { idJobId, idJobOptions } from "./id-jobs.js";
import { jobData } from "./job-rows.js";
import { type QueueNames, REPORT_JOB, type ReportsQueue } from "./reports-queue.js";

// Writes one job of reports to one shard, durably: Redis acknowledged the job's add, and with
// REDIS_ACK_REPLICAS=N, `WAIT N` confirmed that N replicas hold it too. Redis replicates
// asynchronously, so a primary that dies right after acknowledging can take the job with it; the
// replica promoted in its place is one that confirmed it. Kafka calls this acks=all.
//
// WAIT counts the writes of its own connection, so it must follow the add on the same one
// (src/redis/replicas.ts). It is issued in the continuation of the add's reply, before any
// timer can run — ioredis reconnects and refreshes a Cluster's slots only on timers — so it goes
// on the same socket or fails.

export interface ShardWriterOptions {
  queues: ReportsQueue[];
  names: QueueNames[];
  /** The connection the queues write on. */
  redis: RedisClient;
  ackReplicas: number;
  ackTimeoutMs: number;
}

/** `token`: the job is a request's job with ids, under the id id-jobs.ts makes of it. */
export type WriteJob = (shard: number, rows: ReportRow[], token?: string) => Promise<void>;

export function createJobWriter(opts: ShardWriterOptions): WriteJob {
  return async (shard, rows, token) => {
    const queue = opts.queues[shard];
    const names = opts.names[shard];
    if (!queue || !names) throw new EnqueueError(`no queue shard ${shard}`);
    try {
      // addBulk, though it is one job: `queue.add` (one script call, cheaper) left requests
      // without an answer for over 10 s on a connection that went silently dead, where the
      // pipeline addBulk sends fails within the producer's command timeout (faults.redis-kill).
      const opts = token === undefined ? undefined : idJobOptions(token);
      const [job] = await queue.addBulk([{ name: REPORT_JOB, data: jobData(rows), opts }]);
      if (token !== undefined && job?.id !== idJobId(token)) {
        // A repeat found no answer for this write and voided it (id-jobs.ts): it never will be.
        throw new EnqueueError("the job was voided by a repeat of its reports", {
          mayBeStored: false,
        });
      }
    } catch (cause) {
      if (cause instanceof EnqueueError) throw cause;
      throw new EnqueueError("the queue did not acknowledge the job", {
        cause,
        mayBeStored: mayHaveApplied(cause),
      });
    }
    if (opts.ackReplicas === 0) return;
    let acked: number;
    try {
      acked = await waitForReplicas(
        opts.redis,
        `${names.prefix}:${names.name}:meta`,
        opts.ackReplicas,
        opts.ackTimeoutMs,
      );
    } catch (cause) {
      throw new EnqueueError("no answer from Redis on the job's replication", {
        cause,
        mayBeStored: true,
      });
    }
    if (acked < opts.ackReplicas) {
      // The primary holds the job and workers take it from there: it is not withdrawn, because
      // a worker may have it already, and a withdrawal could reach a replica after the job.
      throw new EnqueueError(
        `${acked} of ${opts.ackReplicas} replicas confirmed the job within ${opts.ackTimeoutMs} ms`,
        { mayBeStored: true },
      );
    }
  };
}

/**
 * Whether a write that failed may still have been applied: not when Redis refused it (a reply
 * error) or when it was never sent (no connection); otherwise (a timeout, a connection lost with
 * the write in flight) it may have been.
 */
function mayHaveApplied(err: unknown): boolean {
  if (err instanceof ReplyError) return false;
  return !(err instanceof Error && /enableOfflineQueue options is false/.test(err.message));
}
