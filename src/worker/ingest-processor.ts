import type { Job } from "bullmq";
import type { Logger } from "pino";
import { classifyInsertError, describeError } from "../clickhouse/classify-error.js";
import type { ReportSink } from "../clickhouse/report-sink.js";
import { uuidv7 } from "../lib/uuidv7.js";
import type { ReportJobData } from "../queue/reports-queue.js";
import type { ReportRow } from "../report/report-schema.js";
import type { WorkerMetrics } from "./metrics.js";

// Many jobs in flight, their rows gathered into one ClickHouse insert per batch (flushed at
// `maxRows` rows or `maxWaitMs`). A job's promise settles only after ClickHouse acknowledged the
// insert holding its rows; BullMQ completes the job after that, never before.
//
// - Transient failures (network, ClickHouse down or overloaded) retry the same insert, with the
//   same deduplication token, with exponential backoff, for as long as it takes. The jobs stay
//   active, so their attempts are not used up, and the worker takes no new jobs beyond its
//   concurrency: it pauses by itself.
// - A batch refused for its data is split in halves until the bad rows are isolated; the rest
//   land, the bad rows go to the dead-letter set with ClickHouse's reason.
// - A redelivered job (its previous holder may have inserted before dying) first drops the rows
//   already stored, so the rollups count each report once.

export class ShutdownAbort extends Error {
  override name = "ShutdownAbort";
}

interface Entry {
  job: Job<ReportJobData>;
  /** When the job reached us: the batch is due `maxWaitMs` after its oldest entry. */
  at: number;
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

const RECEIVED_AT = 7; // column index of received_at in REPORT_COLUMNS

export function wasRedelivered(job: Job): boolean {
  return job.attemptsStarted > 1 || job.attemptsMade > 0 || (job.stalledCounter ?? 0) > 0;
}

export function createIngestProcessor(opts: IngestOptions) {
  const { sink, logger, metrics } = opts;
  let pending: Entry[] = [];
  let pendingRows = 0;
  let oldestAt = 0;
  let timer: NodeJS.Timeout | null = null;
  /** Batches being inserted now, and how many jobs they hold. */
  const inFlight = new Set<Promise<void>>();
  let inFlightJobs = 0;
  let closing = false;
  const abort = new AbortController();

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (abort.signal.aborted) return reject(new ShutdownAbort("shutting down"));
      const t = setTimeout(done, ms);
      function done() {
        abort.signal.removeEventListener("abort", onAbort);
        resolve();
      }
      function onAbort() {
        clearTimeout(t);
        reject(new ShutdownAbort("shutting down"));
      }
      abort.signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Runs `fn` until it succeeds or fails for a reason retrying cannot fix. */
  async function withRetry<T>(
    what: string,
    fn: () => Promise<T>,
    isFinal: (e: unknown) => boolean,
  ) {
    for (let attempt = 0; ; attempt++) {
      if (abort.signal.aborted) throw new ShutdownAbort("shutting down");
      try {
        return await fn();
      } catch (err) {
        if (isFinal(err)) throw err;
        metrics.failures.inc({ kind: "transient" });
        const delay = Math.min(opts.retryMaxDelayMs, 200 * 2 ** Math.min(attempt, 16));
        logger.warn(
          { err: describeError(err), attempt, delayMs: delay },
          `${what} failed: retrying`,
        );
        await sleep(delay * (0.75 + Math.random() * 0.5));
      }
    }
  }

  const insert = (rows: ReportRow[], token: string) =>
    withRetry(
      "insert",
      async () => {
        const started = performance.now();
        await sink.insert(rows, token);
        metrics.insertSeconds.observe((performance.now() - started) / 1000);
      },
      (e) => classifyInsertError(e) === "data",
    );

  /** Inserts items; returns the ones ClickHouse refuses for their data, with the reason. */
  async function insertIsolating(items: Item[], token: string): Promise<[Item, string][]> {
    try {
      await insert(
        items.map((i) => i.row),
        token,
      );
      return [];
    } catch (err) {
      if (err instanceof ShutdownAbort) throw err;
      metrics.failures.inc({ kind: "data" });
      if (items.length === 1) return [[items[0] as Item, describeError(err)]];
      const half = Math.ceil(items.length / 2);
      // Tokens derive from the parent's, so a retried split deduplicates like the whole batch.
      return [
        ...(await insertIsolating(items.slice(0, half), `${token}.0`)),
        ...(await insertIsolating(items.slice(half), `${token}.1`)),
      ];
    }
  }

  async function deliver(batch: Entry[]): Promise<void> {
    const items: Item[] = [];
    for (const entry of batch) {
      let rows = entry.rows;
      if (entry.redelivered) {
        const ids = rows.map((r) => String(r[0]));
        const stored = await withRetry(
          "lookup",
          () => sink.existing(ids),
          () => false,
        );
        if (stored.size > 0) {
          rows = rows.filter((r) => !stored.has(String(r[0])));
          metrics.redeliveredSkipped.inc(ids.length - rows.length);
        }
      }
      for (const row of rows) items.push({ row, entry });
    }
    let oldest = Number.POSITIVE_INFINITY;
    for (const entry of batch) {
      const first = entry.rows[0]?.[RECEIVED_AT];
      if (first) oldest = Math.min(oldest, Date.parse(`${String(first).replace(" ", "T")}Z`));
    }
    if (Number.isFinite(oldest)) metrics.lagSeconds.set(Math.max(0, (Date.now() - oldest) / 1000));
    const refused = items.length > 0 ? await insertIsolating(items, uuidv7()) : [];
    metrics.batchRows.observe(items.length);
    metrics.rowsInserted.inc(items.length - refused.length);

    const byEntry = new Map<Entry, { rows: ReportRow[]; reason: string }>();
    for (const [item, reason] of refused) {
      const e = byEntry.get(item.entry) ?? { rows: [], reason };
      e.rows.push(item.row);
      byEntry.set(item.entry, e);
    }
    for (const entry of batch) {
      const bad = byEntry.get(entry);
      if (!bad) {
        entry.resolve();
        continue;
      }
      try {
        await opts.deadLetter(entry.job, bad.rows, bad.reason);
        metrics.deadLettered.inc(bad.rows.length);
        logger.error(
          { jobId: entry.job.id, rows: bad.rows.length, reason: bad.reason },
          "rows dead-lettered",
        );
        entry.resolve();
      } catch (err) {
        // The job fails this attempt and comes back; its good rows are then found stored.
        entry.reject(new Error(`could not dead-letter refused rows: ${describeError(err)}`));
      }
    }
  }

  function take(): Entry[] {
    const batch: Entry[] = [];
    let rows = 0;
    while (
      pending.length > 0 &&
      (batch.length === 0 || rows + (pending[0]?.rows.length ?? 0) <= opts.maxRows)
    ) {
      const e = pending.shift() as Entry;
      batch.push(e);
      rows += e.rows.length;
    }
    pendingRows -= rows;
    oldestAt = pending[0]?.at ?? 0;
    return batch;
  }

  // Due when the batch is full, when the worker cannot take more jobs (every slot is pending or
  // being inserted: waiting longer gains nothing), when it is old enough, or on shutdown.
  const due = () =>
    pendingRows >= opts.maxRows ||
    pending.length + inFlightJobs >= opts.maxJobs ||
    closing ||
    Date.now() - oldestAt >= opts.maxWaitMs;

  function schedule() {
    while (inFlight.size < opts.maxParallelInserts && pending.length > 0 && due()) {
      const batch = take();
      inFlightJobs += batch.length;
      const delivery: Promise<void> = deliver(batch)
        .catch((err: Error) => {
          for (const e of batch) e.reject(err);
        })
        .finally(() => {
          inFlight.delete(delivery);
          inFlightJobs -= batch.length;
          schedule();
        });
      inFlight.add(delivery);
    }
    if (timer || pending.length === 0) return;
    timer = setTimeout(
      () => {
        timer = null;
        schedule();
      },
      Math.max(0, oldestAt + opts.maxWaitMs - Date.now()),
    );
  }

  return {
    /** The BullMQ processor: resolves once the job's rows are in ClickHouse. */
    process(job: Job<ReportJobData>): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        if (closing) return reject(new ShutdownAbort("shutting down"));
        const entry: Entry = {
          job,
          at: Date.now(),
          rows: job.data.rows,
          redelivered: wasRedelivered(job),
          resolve,
          reject,
        };
        if (pending.length === 0) oldestAt = entry.at;
        pending.push(entry);
        pendingRows += entry.rows.length;
        schedule();
      });
    },

    /**
     * Flushes everything in hand now. If that cannot finish within `graceMs` (ClickHouse down),
     * pending work is abandoned with ShutdownAbort so the jobs can go back to the queue.
     */
    async close(graceMs: number): Promise<void> {
      closing = true;
      if (timer) clearTimeout(timer);
      timer = null;
      schedule();
      const giveUp = setTimeout(() => abort.abort(), graceMs);
      try {
        while (inFlight.size > 0 || pending.length > 0) {
          if (inFlight.size === 0) schedule();
          await Promise.all([...inFlight]);
        }
      } finally {
        clearTimeout(giveUp);
        for (const e of pending) e.reject(new ShutdownAbort("shutting down"));
        pending = [];
        pendingRows = 0;
      }
    },
  };
}

export type IngestProcessor = ReturnType<typeof createIngestProcessor>;
