import { randomBytes } from "node:crypto";
import type { RedisClient } from "../redis/connections.js";
import { waitForReplicas } from "../redis/replicas.js";
import { ROW_SHAPES } from "../report/row-shapes.js";
import { EnqueueError } from "./enqueue-error.js";
import {
  createReportsQueue,
  type QueueNames,
  REPORT_JOB,
  type ReportsQueue,
} from "./reports-queue.js";

// Jobs of reports with client ids: one per request, under a job id the edge chooses before it
// claims the ids (report-ids.ts), so that whether the job was written can be found out after any
// failure. BullMQ writes a record of the job id (its deduplication key, with a TTL) in the same
// script that adds the job, and keeps it after the job completed and was removed; the record
// outlives every claim that names the job.
//
// A claim left unknown is settled by adding an empty "void" job under the same deduplication
// id: if the job was written, BullMQ answers with its id and adds nothing; if not, the void job
// takes the record, and the job's own write, should it still arrive (a command that timed out
// may yet run), is dropped as a duplicate. The answer is final either way. With
// REDIS_ACK_REPLICAS, "written" also waits for the replicas, as the job's 200 would have: a
// repeat answered `duplicate` must not lose its report with the primary.

/** Where a request's job with ids goes: its shard and the token its job id is made from. */
export interface JobPlace {
  shard: number;
  prefix: string;
  token: string;
}

/**
 * The write record outlives the claims that name the job: a stored or unknown claim lasts a day
 * from its job's write, a pending one a day and REPORT_ID_PENDING_MS (at most 10 min) from before it.
 */
export const WRITTEN_MS = 24 * 60 * 60 * 1000 + 20 * 60_000;

export const idJobId = (token: string) => `ids-${token}`;
const voidJobId = (token: string) => `ids-${token}-void`;

/** Options for the job of the request at this place: its id, and the record of its write. */
export const idJobOptions = (token: string) => ({
  jobId: idJobId(token),
  deduplication: { id: idJobId(token), ttl: WRITTEN_MS },
});

export interface IdJobs {
  /** A new place: a random token, on the shard it falls on. */
  place(): JobPlace;
  /**
   * Whether the job of `token` on `prefix` was written; after this it never will be. Throws
   * (an EnqueueError) when it was but fewer than REDIS_ACK_REPLICAS replicas confirm it.
   */
  written(job: { prefix: string; token: string }): Promise<boolean>;
}

export function createIdJobs(opts: {
  redis: RedisClient;
  names: QueueNames[];
  queues: ReportsQueue[];
  ackReplicas: number;
  ackTimeoutMs: number;
}): IdJobs {
  const name = opts.names[0]?.name ?? REPORT_JOB;
  const queueOf = (prefix: string): { queue: ReportsQueue; own: boolean } => {
    const i = opts.names.findIndex((n) => n.prefix === prefix);
    if (i >= 0) return { queue: opts.queues[i] as ReportsQueue, own: false };
    // A shard no longer configured (QUEUE_SHARDS changed): a queue object for this question.
    return { queue: createReportsQueue(opts.redis, { prefix, name }), own: true };
  };

  return {
    place(): JobPlace {
      const token = randomBytes(12).toString("hex");
      const shard = Number.parseInt(token.slice(0, 8), 16) % opts.names.length;
      return { shard, prefix: (opts.names[shard] as QueueNames).prefix, token };
    },

    async written(job: { prefix: string; token: string }): Promise<boolean> {
      const { queue, own } = queueOf(job.prefix);
      try {
        const added = await queue.add(
          REPORT_JOB,
          { v: ROW_SHAPES.current, rows: [] },
          { ...idJobOptions(job.token), jobId: voidJobId(job.token) },
        );
        const written = added.id === idJobId(job.token);
        if (written && opts.ackReplicas > 0) {
          // The add wrote on this connection after the job (BullMQ records the repeat as a
          // `deduplicated` event), so WAIT confirms the job's own write too.
          const acked = await waitForReplicas(
            opts.redis,
            `${job.prefix}:${name}:meta`,
            opts.ackReplicas,
            opts.ackTimeoutMs,
          );
          if (acked < opts.ackReplicas) {
            throw new EnqueueError(
              `${acked} of ${opts.ackReplicas} replicas confirmed the job within ${opts.ackTimeoutMs} ms`,
              { mayBeStored: true },
            );
          }
        }
        return written;
      } finally {
        if (own) await queue.close();
      }
    },
  };
}
