import type { ReportRow } from "../report/report-schema.js";
import { REPORT_JOB, type ReportsQueue } from "./reports-queue.js";

// Groups reports from concurrent requests into jobs: one `addBulk` round trip for up to
// `maxReports` reports or whatever arrived within `maxWaitMs`. Each caller's promise settles only
// after Redis acknowledged the job that holds its report.

/** Redis did not acknowledge the job holding the report: it is not durably queued. */
export class EnqueueError extends Error {
  override name = "EnqueueError";
}

interface Pending {
  row: ReportRow;
  resolve: () => void;
  reject: (err: Error) => void;
}

export interface EnqueuerOptions {
  /** Only `addBulk` is used: a test's fake needs nothing else. */
  queue: Pick<ReportsQueue, "addBulk">;
  maxReports: number;
  maxWaitMs: number;
  onFlush?: (reports: number, seconds: number, ok: boolean) => void;
}

export function createEnqueuer(opts: EnqueuerOptions) {
  let pending: Pending[] = [];
  let timer: NodeJS.Timeout | null = null;
  const inFlight = new Set<Promise<void>>();

  async function write(batch: Pending[]) {
    const started = process.hrtime.bigint();
    let ok = true;
    try {
      await opts.queue.addBulk([
        { name: REPORT_JOB, data: { v: 1, rows: batch.map((p) => p.row) } },
      ]);
      for (const p of batch) p.resolve();
    } catch (cause) {
      ok = false;
      const err = new EnqueueError("the queue did not acknowledge the job", { cause });
      for (const p of batch) p.reject(err);
    }
    // After the callers are settled: what the callback does cannot change their answer.
    opts.onFlush?.(batch.length, Number(process.hrtime.bigint() - started) / 1e9, ok);
  }

  function flush(): Promise<void> {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    if (pending.length === 0) return Promise.resolve();
    const batch = pending;
    pending = [];
    const p = write(batch).finally(() => inFlight.delete(p));
    inFlight.add(p);
    return p;
  }

  return {
    enqueue(row: ReportRow): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        pending.push({ row, resolve, reject });
        if (pending.length >= opts.maxReports) void flush();
        else if (!timer) timer = setTimeout(flush, opts.maxWaitMs);
      });
    },

    /** Writes what is pending and waits for every write under way. */
    async drain(): Promise<void> {
      await flush();
      await Promise.all([...inFlight]);
    },
  };
}

export type Enqueuer = ReturnType<typeof createEnqueuer>;
