import type { Job } from "bullmq";
import { ReplyError } from "ioredis";
import type { Logger } from "pino";
import { v7 as uuidv7 } from "uuid";
import { classifyInsertError, describeError } from "../clickhouse/classify-error.js";
import type { ReportSink } from "../clickhouse/report-sink.js";
import type { ReportJobData } from "../queue/reports-queue.js";
import { type ReportRow, receivedAtMsOf } from "../report/report-schema.js";
import { createBatcher } from "./batcher.js";
import { DataError, insertIsolating } from "./bisecting-insert.js";
import type { WorkerMetrics } from "./metrics.js";
import { retryUntilDone, ShutdownAbort, shutdownSignal } from "../lib/retry.js";
import type { Manifest, ManifestStore } from "./batch-manifests.js";

// Many jobs in flight, their rows gathered into one ClickHouse insert per batch (batcher.ts). A
// job's promise settles only after ClickHouse acknowledged the insert holding its rows; BullMQ
// completes the job after that, never before.
//
// - Every batch is recorded as a manifest before it is inserted (batch-manifests.ts): a job that
//   comes back (its worker stalled or died) is re-inserted with its manifest, byte for byte and
//   with the same token, so ClickHouse keeps its rows once, in every view.
// - Transient failures (network, ClickHouse down or overloaded) retry the same insert for as long
//   as it takes (retry.ts). The jobs stay active, so their attempts are not used up, and the
//   worker takes no new jobs beyond its concurrency: it pauses by itself.
// - A batch refused for its data is split until the bad rows are isolated (bisecting-insert.ts);
//   the rest land, the bad rows go to the dead-letter set with ClickHouse's reason.

export { ShutdownAbort };

interface Entry {
  job: Job<ReportJobData>;
  id: string;
  lockToken: string;
  rows: ReportRow[];
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Item {
  row: ReportRow;
  jobId: string;
}

/** The job is held by another worker now (this one stalled past its lock): not ours to finish. */
export class LostJobError extends Error {
  override name = "LostJobError";
}

export interface IngestOptions {
  sink: ReportSink;
  manifests: ManifestStore;
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
  /**
   * Called once ClickHouse acknowledged a manifest's insert, before its jobs are resolved, with
   * the rows that were stored. A redelivered job re-inserts its manifest and calls this again
   * with the same token and rows: what it does must be idempotent. Failures are retried.
   */
  onStored?: (manifest: Manifest) => Promise<void>;
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

  /**
   * Manifest operations retry what passes (Redis down, loading, busy, out of memory) and give up
   * on what cannot: a script error, a key of the wrong type, a manifest that does not parse.
   */
  const cannotPass = (e: unknown) =>
    e instanceof SyntaxError ||
    (e instanceof ReplyError && /^(ERR|WRONGTYPE)\b/.test((e as Error).message));

  async function deliver(batch: Entry[]): Promise<void> {
    observeLag(batch);
    let left = newestOfEach(batch);
    while (left.length > 0) {
      // Jobs that already belong to a manifest go in again with it; the others get a new one.
      const ids = left.map((e) => e.id);
      const owners = await retry("manifest lookup", () => opts.manifests.owners(ids), cannotPass);
      const byToken = new Map<string, Entry[]>();
      for (const e of left) {
        const token = owners.get(e.id);
        if (token) byToken.set(token, [...(byToken.get(token) ?? []), e]);
      }
      for (const [token, held] of byToken) await reinsert(token, held);
      const fresh = left.filter((e) => !owners.has(e.id));
      if (fresh.length === 0) return;
      const manifest: Manifest = {
        token: uuidv7(),
        rows: fresh.flatMap((e) => e.rows),
        jobs: fresh.map((e) => [e.id, e.rows.length]),
      };
      const claim = await retry(
        "manifest claim",
        () => opts.manifests.claim(manifest, fresh),
        cannotPass,
      );
      if (claim.claimed) return insertManifest(manifest, fresh);
      // Some jobs were taken over or claimed meanwhile: drop the lost ones, adopt the others.
      const lost = new Set(claim.lost);
      for (const e of fresh) if (lost.has(e.id)) loseJob(e);
      left = fresh.filter((e) => !lost.has(e.id));
    }
  }

  /** A redelivered job: its manifest is inserted again, exactly as it was the first time. */
  async function reinsert(token: string, held: Entry[]): Promise<void> {
    metrics.manifestsReinserted.inc();
    const manifest = await retry("manifest read", () => opts.manifests.get(token), cannotPass);
    // Gone: every job of it was completed, these too, by whoever held them after us.
    if (!manifest) for (const e of held) loseJob(e);
    else await insertManifest(manifest, held);
  }

  /** The stored part of a manifest (without rows ClickHouse refused) to the onStored hook. */
  async function notifyStored(manifest: Manifest, refused: [Item, unknown][] | null) {
    let stored = manifest;
    if (refused) {
      const bad = new Set(refused.map(([item]) => item.row));
      stored = { ...manifest, rows: manifest.rows.filter((r) => !bad.has(r)) };
    }
    const onStored = opts.onStored as (m: Manifest) => Promise<void>;
    await retry("stored hook", () => onStored(stored), cannotPass);
  }

  /**
   * A worker that stalled can be handed its own job again (a new lock) while the old delivery is
   * still pending: only the newest is this worker's; the older one lets go.
   */
  function newestOfEach(batch: Entry[]): Entry[] {
    const newest = new Map<string, Entry>();
    for (const e of batch) {
      const seen = newest.get(e.id);
      if (seen) loseJob(seen);
      newest.set(e.id, e);
    }
    return newest.size === batch.length ? batch : [...newest.values()];
  }

  function loseJob(entry: Entry) {
    metrics.jobsLost.inc();
    entry.reject(new LostJobError(`job ${entry.id} is held by another worker now`));
  }

  /** Inserts a manifest's rows with its token; then settles the jobs this worker holds. */
  async function insertManifest(manifest: Manifest, held: Entry[]): Promise<void> {
    const items: Item[] = [];
    let i = 0;
    for (const [jobId, count] of manifest.jobs) {
      for (const row of manifest.rows.slice(i, i + count)) items.push({ row, jobId });
      i += count;
    }
    // Splitting a refused batch inserts its halves under tokens of their own: only a worker that
    // still holds its jobs may do that, or the halves could land beside the whole batch inserted
    // by the jobs' new holder.
    const insertOrSplit = async (part: Item[], token: string) => {
      try {
        await insert(part, token);
      } catch (err) {
        if (err instanceof DataError && token === manifest.token) {
          const lost = await retry("lock check", () => opts.manifests.lost(held), cannotPass);
          if (lost.length > 0) throw new LostJobError(`jobs ${lost.join(", ")} are held elsewhere`);
        }
        throw err;
      }
    };
    const refused =
      items.length > 0
        ? await insertIsolating(items, manifest.token, insertOrSplit, () =>
            metrics.failures.inc({ kind: "data" }),
          )
        : [];
    metrics.batchRows.observe(items.length);
    metrics.rowsInserted.inc(items.length - refused.length);
    if (opts.onStored) await notifyStored(manifest, refused.length > 0 ? refused : null);

    const byJob = new Map<string, { rows: ReportRow[]; reason: string }>();
    for (const [item, cause] of refused) {
      const e = byJob.get(item.jobId) ?? { rows: [], reason: describeError(cause) };
      e.rows.push(item.row);
      byJob.set(item.jobId, e);
    }
    for (const entry of held) {
      const bad = byJob.get(entry.id);
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
    process(job: Job<ReportJobData>, lockToken: string): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        if (closing) return reject(new ShutdownAbort("shutting down"));
        if (wasRedelivered(job)) metrics.redeliveredJobs.inc();
        const rows = job.data.rows;
        batcher.add({ job, id: String(job.id), lockToken, rows, resolve, reject });
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
