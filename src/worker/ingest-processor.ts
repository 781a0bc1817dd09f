import type { Job } from "bullmq";
import type { Logger } from "pino";
import { classifyInsertError, describeError } from "../clickhouse/classify-error.js";
import type { ReportSink } from "../clickhouse/report-sink.js";
import { retryUntilDone, ShutdownAbort, shutdownSignal } from "../lib/retry.js";
import { jobRows } from "../queue/job-rows.js";
import type { ReportJobData } from "../queue/reports-queue.js";
import { type ReportRow, receivedAtMsOf } from "../report/report-schema.js";
import { ROW_SHAPES, type RowShapes } from "../report/row-shapes.js";
import { createBatcher } from "./batcher.js";
import { DataError } from "./bisecting-insert.js";
import type { PlaceRows } from "./declared-pools.js";
import { createInsertSlots } from "./insert-slots.js";
import { createManifestDelivery, type Entry as ManifestEntry } from "./manifest-delivery.js";
import type { Manifest, ManifestStore } from "./manifest-store.js";
import type { WorkerMetrics } from "./metrics.js";

// Many jobs in flight, their rows gathered into one ClickHouse insert per batch (batcher.ts). A
// job's promise settles only after ClickHouse acknowledged the insert holding its rows; BullMQ
// completes the job after that, never before.
//
// - Every batch is recorded as a manifest before it is inserted (manifest-store.ts): a job that
//   comes back (its worker stalled or died) is re-inserted with its manifest, byte for byte and
//   with the same token, so ClickHouse keeps its rows once, in every view.
// - Transient failures (network, ClickHouse down or overloaded) retry the same insert for as long
//   as it takes (retry.ts). The jobs stay active, so their attempts are not used up, and the
//   worker takes no new jobs beyond its concurrency: it pauses by itself.
// - A batch refused for its data is split until the bad rows are isolated (bisecting-insert.ts);
//   the rest land, the bad rows go to the dead-letter set with ClickHouse's reason.

type Entry = ManifestEntry<Job<ReportJobData>>;

export interface IngestOptions {
  sink: ReportSink;
  manifests: ManifestStore;
  maxRows: number;
  maxWaitMs: number;
  /** A batch this old goes while an insert slot is free (BATCH_MIN_WAIT_MS); unset: never early. */
  minWaitMs?: number;
  /** ... and only this long after the previous batch went (BATCH_MIN_INTERVAL_MS); unset: 0. */
  minIntervalMs?: number;
  /** The worker's concurrency: with this many jobs in hand, waiting for more is pointless. */
  maxJobs: number;
  /**
   * Rows in hand at which waiting for more is pointless (the worker takes no more jobs then):
   * the batch goes at once. Unset: no bound but maxJobs.
   */
  maxRowsInHand?: number;
  /** The jobs whose rows are in hand and those rows, after each change. */
  onHand?: (jobs: number, rows: number) => void;
  /**
   * Batches in hand at once (claimed, being inserted, or being settled), so that the next ones
   * are claimed while one is being inserted; maxParallelInserts when not given.
   */
  maxParallelBatches?: number;
  /** Inserts ClickHouse is sent at once. */
  maxParallelInserts: number;
  retryMaxDelayMs: number;
  /** Stores rows ClickHouse refused, with the reason, where `dlq` can list and replay them. */
  deadLetter: (job: Job<ReportJobData>, rows: ReportRow[], reason: string) => Promise<void>;
  logger: Logger;
  metrics: WorkerMetrics;
  /**
   * Called once ClickHouse acknowledged a manifest's insert, before its jobs are resolved, with
   * the rows that were stored. A redelivered job re-inserts its manifest and calls this again
   * with the same token and rows: what it does must be idempotent. Failures are retried.
   */
  onStored?: (manifest: Manifest) => Promise<void>;
  /**
   * Told as a manifest's insert starts, in its insert slot (again when it is inserted again): a
   * hook may read ahead what its onStored will write. It must write nothing: the rows are not
   * stored yet.
   */
  onInserting?: (manifest: Manifest) => void;
  /** Row shapes this release reads; each job's rows are mapped to the current one. */
  rowShapes?: RowShapes;
  /**
   * A job's rows as they are to be stored (declared pools, declared-pools.ts), before they join a
   * batch: a failure fails the job, to be retried.
   */
  placeRows?: PlaceRows;
  /** How long a batch waits for replicas (REDIS_ACK_REPLICAS) before an error is logged. */
  replicaWaitWarnMs?: number;
}

export function wasRedelivered(job: Job): boolean {
  return job.attemptsStarted > 1 || job.attemptsMade > 0 || (job.stalledCounter ?? 0) > 0;
}

export interface IngestProcessor {
  /** The BullMQ processor: resolves once the job's rows are in ClickHouse. */
  process(job: Job<ReportJobData>, lockToken: string): Promise<void>;
  /** The queue had no job to give (BullMQ's `drained`). */
  drained: () => void;
  /**
   * Flushes everything in hand now. If that cannot finish within `graceMs` (ClickHouse down),
   * pending work is abandoned with ShutdownAbort so the jobs can go back to the queue.
   */
  close(graceMs: number): Promise<void>;
}

export function createIngestProcessor(opts: IngestOptions): IngestProcessor {
  const { sink, logger, metrics } = opts;
  const shutdown = shutdownSignal();
  // Closing: no job is taken. Flushing: the last batch is under way, so rows placed after it
  // go back to the queue; a job taken before the close whose rows are still being placed (a
  // declarations read) waits for them and goes in that batch.
  let closing = false;
  let flushing = false;
  const placing = new Set<Promise<void>>();

  const retry = <T>(what: string, fn: () => Promise<T>, isFinal: (e: unknown) => boolean) =>
    retryUntilDone(fn, {
      isFinal,
      signal: shutdown.signal,
      maxDelayMs: opts.retryMaxDelayMs,
      onRetry: (err, attempt) => {
        metrics.failures.inc({ kind: "transient" });
        logger.warn({ err: describeError(err), attempt }, `${what} failed: retrying`);
      },
    });

  const inSlot = createInsertSlots(opts.maxParallelInserts);
  const insert = (rows: ReportRow[], token: string, json?: Buffer, started?: () => void) => {
    let tell = started;
    return retry(
      "insert",
      () =>
        inSlot(async () => {
          tell?.();
          tell = undefined;
          const startedAt = performance.now();
          try {
            await sink.insert(rows, token, json);
          } catch (err) {
            throw classifyInsertError(err) === "data"
              ? new DataError("refused", { cause: err })
              : err;
          }
          metrics.insertSeconds.observe((performance.now() - startedAt) / 1000);
        }),
      (e) => e instanceof DataError,
    );
  };

  const deliverManifests = createManifestDelivery<Job<ReportJobData>>({
    manifests: opts.manifests,
    insert,
    stored: (rows) => sink.stored(rows),
    retry,
    deadLetter: opts.deadLetter,
    onStored: opts.onStored,
    onInserting: opts.onInserting,
    replicaWaitWarnMs: opts.replicaWaitWarnMs,
    logger,
    metrics,
  });

  function observeLag(batch: Entry[]) {
    let oldest = Number.POSITIVE_INFINITY;
    for (const entry of batch) {
      const at = entry.rows[0] ? receivedAtMsOf(entry.rows[0]) : Number.NaN;
      if (Number.isFinite(at)) oldest = Math.min(oldest, at);
    }
    if (Number.isFinite(oldest)) metrics.recordLag(Math.max(0, (Date.now() - oldest) / 1000));
  }

  const batcher = createBatcher<Entry>({
    maxRows: opts.maxRows,
    maxWaitMs: opts.maxWaitMs,
    maxEntries: opts.maxJobs,
    maxParallel: opts.maxParallelBatches ?? opts.maxParallelInserts,
    minWaitMs: opts.minWaitMs,
    minIntervalMs: opts.minIntervalMs,
    maxRowsInHand: opts.maxRowsInHand,
    // A batch more than the inserts in hand would wait for a slot: no reason to go early.
    idleBelow: opts.maxParallelInserts,
    onClose: (reason, waitedMs) => {
      metrics.batchesClosed.inc({ reason });
      for (const ms of waitedMs) metrics.stageSeconds.observe({ stage: "batched" }, ms / 1000);
    },
    rowsOf: (e) => e.rows.length,
    deliver: (batch) => {
      observeLag(batch);
      return deliverManifests(batch);
    },
    onFailed: (batch, err) => {
      for (const e of batch) e.reject(err);
    },
  });

  // The jobs in hand and their rows, from their rows' placing until their job settles.
  let jobsInHand = 0;
  let rowsInHand = 0;
  const hold = (jobs: number, rows: number) => {
    jobsInHand += jobs;
    rowsInHand += rows;
    opts.onHand?.(jobsInHand, rowsInHand);
  };

  return {
    process(job: Job<ReportJobData>, lockToken: string): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        if (closing) return reject(new ShutdownAbort("shutting down"));
        if (wasRedelivered(job)) metrics.redeliveredJobs.inc();
        else if (Number.isFinite(job.timestamp)) {
          // From the edge's enqueue (its clock) to this worker: a first delivery's time in queue.
          const queuedMs = Math.max(0, Date.now() - job.timestamp);
          metrics.stageSeconds.observe({ stage: "queued" }, queuedMs / 1000);
        }
        let rows: ReportRow[];
        try {
          // A job queued by an older edge; one from a newer release fails, to wait for replay.
          rows = jobRows(job.data, opts.rowShapes ?? ROW_SHAPES);
        } catch (err) {
          return reject(err as Error);
        }
        const replay = job.data.replay === true;
        const add = (placed: ReportRow[]) => {
          if (flushing) return reject(new ShutdownAbort("shutting down"));
          const n = placed.length;
          let held = true;
          const release = () => {
            if (held) hold(-1, -n);
            held = false;
          };
          hold(1, n);
          batcher.add({
            job,
            id: String(job.id),
            lockToken,
            rows: placed,
            replay,
            resolve: () => {
              release();
              resolve();
            },
            reject: (err) => {
              release();
              reject(err);
            },
          });
        };
        if (!opts.placeRows) {
          add(rows);
          return;
        }
        const placed: Promise<void> = opts
          .placeRows(rows)
          .then(add, reject)
          .catch(reject)
          .finally(() => placing.delete(placed));
        placing.add(placed);
      });
    },

    drained: () => batcher.drained(),

    async close(graceMs: number): Promise<void> {
      closing = true;
      const timers: NodeJS.Timeout[] = [];
      // Past the grace period: no more retries, what was not handed to a delivery goes back to
      // the queue, and a delivery still under way (a connection that never answers) is given
      // 2 s more, then left to its job's lock: it expires, and the manifest makes the job's
      // next delivery exact.
      const gaveUp = new Promise<void>((resolve) => {
        timers.push(
          setTimeout(() => {
            flushing = true;
            shutdown.abort();
            for (const e of batcher.drop()) e.reject(new ShutdownAbort("shutting down"));
            timers.push(setTimeout(resolve, 2_000));
          }, graceMs),
        );
      });
      try {
        const flushed = Promise.all([...placing]).then(() => {
          flushing = true;
          return batcher.flush();
        });
        await Promise.race([flushed, gaveUp]);
      } finally {
        for (const t of timers) clearTimeout(t);
      }
    },
  };
}
