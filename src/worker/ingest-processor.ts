import type { Job } from "bullmq";
import type { Logger } from "pino";
import { v7 as uuidv7 } from "uuid";
import { classifyInsertError, describeError } from "../clickhouse/classify-error.js";
import type { ReportSink } from "../clickhouse/report-sink.js";
import type { ReportJobData } from "../queue/reports-queue.js";
import { type ReportRow, receivedAtMsOf, reportIdOf } from "../report/report-schema.js";
import { createBatcher } from "./batcher.js";
import { DataError, insertIsolating } from "./bisecting-insert.js";
import type { WorkerMetrics } from "./metrics.js";
import { retryUntilDone, ShutdownAbort, shutdownSignal } from "./retry.js";

// Many jobs in flight, their rows gathered into one ClickHouse insert per batch (batcher.ts). A
// job's promise settles only after ClickHouse acknowledged the insert holding its rows; BullMQ
// completes the job after that, never before.
//
// - Transient failures (network, ClickHouse down or overloaded) retry the same insert, with the
//   same deduplication token, for as long as it takes (retry.ts). The jobs stay active, so their
//   attempts are not used up, and the worker takes no new jobs beyond its concurrency: it pauses
//   by itself.
// - A batch refused for its data is split until the bad rows are isolated (bisecting-insert.ts);
//   the rest land, the bad rows go to the dead-letter set with ClickHouse's reason.
// - A redelivered job (its previous holder may have inserted before dying) first drops the rows
//   already stored, so the rollups count each report once.

export { ShutdownAbort };

interface Entry {
  job: Job<ReportJobData>;
  rows: ReportRow[];
  redelivered: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Item {
  row: ReportRow;
  entry: Entry;
}

export interface IngestOptions {
  sink: ReportSink;
  maxRows: number;
  maxWaitMs: number;
  /** The worker's concurrency: with this many jobs in hand, waiting for more is pointless. */
  maxJobs: number;
  /** Batches inserted at once: the next batch fills while one is being inserted. */
  maxParallelInserts: number;
  retryMaxDelayMs: number;
  /** Stores rows ClickHouse refused, with the reason, where `dlq` can list and replay them. */
  deadLetter: (job: Job<ReportJobData>, rows: ReportRow[], reason: string) => Promise<void>;
  logger: Logger;
  metrics: WorkerMetrics;
}

export function wasRedelivered(job: Job): boolean {
  return job.attemptsStarted > 1 || job.attemptsMade > 0 || (job.stalledCounter ?? 0) > 0;
}

export function createIngestProcessor(opts: IngestOptions) {
  const { sink, logger, metrics } = opts;
  const shutdown = shutdownSignal();
  let closing = false;

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

  const insert = (items: Item[], token: string) =>
    retry(
      "insert",
      async () => {
        const started = performance.now();
        try {
          await sink.insert(
            items.map((i) => i.row),
            token,
          );
        } catch (err) {
          throw classifyInsertError(err) === "data"
            ? new DataError("refused", { cause: err })
            : err;
        }
        metrics.insertSeconds.observe((performance.now() - started) / 1000);
      },
      (e) => e instanceof DataError,
    );

  /** A redelivered job's rows that are not stored yet. */
  async function unstored(entry: Entry): Promise<ReportRow[]> {
    if (!entry.redelivered) return entry.rows;
    const ids = entry.rows.map(reportIdOf);
    const stored = await retry(
      "lookup",
      () => sink.existing(ids),
      () => false,
    );
    if (stored.size === 0) return entry.rows;
    metrics.redeliveredSkipped.inc(stored.size);
    return entry.rows.filter((r) => !stored.has(reportIdOf(r)));
  }

  async function deliver(batch: Entry[]): Promise<void> {
    const items: Item[] = [];
    for (const entry of batch) for (const row of await unstored(entry)) items.push({ row, entry });
    observeLag(batch);
    const refused =
      items.length > 0
        ? await insertIsolating(items, uuidv7(), insert, () =>
            metrics.failures.inc({ kind: "data" }),
          )
        : [];
    metrics.batchRows.observe(items.length);
    metrics.rowsInserted.inc(items.length - refused.length);

    const byEntry = new Map<Entry, { rows: ReportRow[]; reason: string }>();
    for (const [item, cause] of refused) {
      const e = byEntry.get(item.entry) ?? { rows: [], reason: describeError(cause) };
      e.rows.push(item.row);
      byEntry.set(item.entry, e);
    }
    for (const entry of batch) {
      const bad = byEntry.get(entry);
      if (bad) await deadLetter(entry, bad.rows, bad.reason);
      else entry.resolve();
    }
  }

  async function deadLetter(entry: Entry, rows: ReportRow[], reason: string) {
    try {
      await opts.deadLetter(entry.job, rows, reason);
      metrics.deadLettered.inc(rows.length);
      logger.error({ jobId: entry.job.id, rows: rows.length, reason }, "rows dead-lettered");
      entry.resolve();
    } catch (err) {
      // The job fails this attempt and comes back; its good rows are then found stored.
      entry.reject(new Error(`could not dead-letter refused rows: ${describeError(err)}`));
    }
  }

  function observeLag(batch: Entry[]) {
    let oldest = Number.POSITIVE_INFINITY;
    for (const entry of batch) {
      const at = entry.rows[0] ? receivedAtMsOf(entry.rows[0]) : Number.NaN;
      if (Number.isFinite(at)) oldest = Math.min(oldest, at);
    }
    if (Number.isFinite(oldest)) metrics.lagSeconds.set(Math.max(0, (Date.now() - oldest) / 1000));
  }

  const batcher = createBatcher<Entry>({
    maxRows: opts.maxRows,
    maxWaitMs: opts.maxWaitMs,
    maxEntries: opts.maxJobs,
    maxParallel: opts.maxParallelInserts,
    rowsOf: (e) => e.rows.length,
    deliver,
    onFailed: (batch, err) => {
      for (const e of batch) e.reject(err);
    },
  });

  return {
    /** The BullMQ processor: resolves once the job's rows are in ClickHouse. */
    process(job: Job<ReportJobData>): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        if (closing) return reject(new ShutdownAbort("shutting down"));
        const rows = job.data.rows;
        batcher.add({ job, rows, redelivered: wasRedelivered(job), resolve, reject });
      });
    },

    /**
     * Flushes everything in hand now. If that cannot finish within `graceMs` (ClickHouse down),
     * pending work is abandoned with ShutdownAbort so the jobs can go back to the queue.
     */
    async close(graceMs: number): Promise<void> {
      closing = true;
      const giveUp = setTimeout(() => {
        shutdown.abort();
        for (const e of batcher.drop()) e.reject(new ShutdownAbort("shutting down"));
      }, graceMs);
      try {
        await batcher.flush();
      } finally {
        clearTimeout(giveUp);
      }
    },
  };
}

export type IngestProcessor = ReturnType<typeof createIngestProcessor>;
