import type { ReportRow } from "../report/report-schema.js";
import { EnqueueError } from "./enqueue-error.js";
import type { WriteJob } from "./job-writer.js";

// Group commit. Reports from concurrent requests share jobs: a report joins the next job while
// the previous one is being written, and that job goes as soon as a shard has no write in flight,
// or at once when it holds `maxReports`. At low load a report waits for nothing (the rest of the
// event loop's turn, or `lingerMs`); under load jobs grow by themselves, as large as the reports
// that arrived during one write. Each caller's promise settles only after Redis acknowledged the
// job that holds its report (and its replicas did, when the writer waits for them).

/**
 * Told once the job holding the report was acknowledged (no error), or failed. It must not
 * throw: the other reports of the job are told after it.
 */
export type Enqueued = (err?: EnqueueError) => void;

interface Pending {
  row: ReportRow;
  done: Enqueued;
}

export interface EnqueuerOptions {
  write: WriteJob;
  /** Queue shards: one job in flight on each before reports wait for an acknowledgement. */
  shards: number;
  maxReports: number;
  /** How long a report waits for others when a shard is free (0: the event loop's turn). */
  lingerMs: number;
  onFlush?: (reports: number, seconds: number, ok: boolean) => void;
  /** After a failed write a shard is passed over this long, while another can take the job. */
  shardCooldownMs?: number;
  now?: () => number;
}

/** A shard whose primary fails (over) should not take every other job meanwhile. */
const SHARD_COOLDOWN_MS = 1_000;

export interface Enqueuer {
  add: (row: ReportRow, done: Enqueued) => void;
  /** `add` as a promise. */
  enqueue(row: ReportRow): Promise<void>;
  /**
   * A batch's reports, as many adds with one promise: it resolves once every job holding
   * them settled, with each report's error (undefined: acknowledged), in order. They may span
   * jobs, so some may fail while others are stored.
   */
  enqueueMany(rows: ReportRow[]): Promise<(EnqueueError | undefined)[]>;
  /**
   * A request's reports with ids, as a job of their own on the place's shard (id-jobs.ts):
   * no other report joins it. Resolves once it is acknowledged; rejects with the EnqueueError.
   */
  writeJob(shard: number, token: string, rows: ReportRow[]): Promise<void>;
  /** Writes what is pending and waits for every write under way. */
  drain(): Promise<void>;
}

export function createEnqueuer(opts: EnqueuerOptions): Enqueuer {
  let pending: Pending[] = [];
  const writing = new Array<number>(opts.shards).fill(0);
  const failedUntil = new Array<number>(opts.shards).fill(0);
  const now = opts.now ?? Date.now;
  let nextShard = 0;
  let scheduled = false;
  const inFlight = new Set<Promise<void>>();

  async function write(shard: number, batch: Pending[], token?: string) {
    const started = process.hrtime.bigint();
    let failure: EnqueueError | undefined;
    try {
      await opts.write(
        shard,
        batch.map((p) => p.row),
        token,
      );
    } catch (cause) {
      failedUntil[shard] = now() + (opts.shardCooldownMs ?? SHARD_COOLDOWN_MS);
      failure =
        cause instanceof EnqueueError
          ? cause
          : new EnqueueError("the queue did not acknowledge the job", { cause });
    }
    for (const p of batch) p.done(failure);
    const ok = failure === undefined;
    // After the callers are settled: what the callback does cannot change their answer.
    opts.onFlush?.(batch.length, Number(process.hrtime.bigint() - started) / 1e9, ok);
  }

  function send(shard: number) {
    const batch = pending.length <= opts.maxReports ? pending : pending.slice(0, opts.maxReports);
    pending = batch === pending ? [] : pending.slice(opts.maxReports);
    nextShard = (shard + 1) % opts.shards;
    start(shard, batch);
  }

  /** A write under way: the shard is busy, and drain waits for it. */
  function start(shard: number, batch: Pending[], token?: string): Promise<void> {
    writing[shard] = (writing[shard] ?? 0) + 1;
    const p = write(shard, batch, token).finally(() => {
      inFlight.delete(p);
      writing[shard] = (writing[shard] ?? 1) - 1;
      // What arrived during this write goes as one job, with what the requests already read in
      // this turn of the event loop add to it (the acknowledgement is read among them).
      if (pending.length > 0) schedule(true);
    });
    inFlight.add(p);
    return p;
  }

  /**
   * The next shard in turn that may take a job: one whose last write did not fail lately, unless
   * every shard's did (then any); with `idle`, also one with no write in flight. -1 if none.
   */
  function pickShard(idle: boolean): number {
    const t = now();
    const healthy = (s: number) => (failedUntil[s] ?? 0) <= t;
    const anyHealthy = failedUntil.some((_, s) => healthy(s));
    for (let k = 0; k < opts.shards; k++) {
      const shard = (nextShard + k) % opts.shards;
      if (idle && writing[shard] !== 0) continue;
      if (!anyHealthy || healthy(shard)) return shard;
    }
    return -1;
  }

  /** Sends what may go now; `all` sends everything, busy shards or not (drain). */
  function pump(all: boolean) {
    while (pending.length > 0) {
      const idle = pickShard(true);
      if (idle >= 0) send(idle);
      else if (all || pending.length >= opts.maxReports) send(pickShard(false));
      else return;
    }
  }

  /** Sends at the end of this turn of the event loop, or after lingerMs when nothing is written. */
  function schedule(afterWrite = false) {
    if (scheduled) return;
    scheduled = true;
    const run = () => {
      scheduled = false;
      pump(false);
    };
    if (opts.lingerMs > 0 && !afterWrite) setTimeout(run, opts.lingerMs);
    else setImmediate(run);
  }

  /** After reports were added: a full job goes now, anything else by the end of this turn. */
  function added(): void {
    if (pending.length >= opts.maxReports) pump(false);
    else if (pickShard(true) >= 0) schedule();
  }

  /** Adds a report to the next job; `done` is told when that job is acknowledged or failed. */
  function add(row: ReportRow, done: Enqueued): void {
    pending.push({ row, done });
    added();
  }

  return {
    add,

    enqueue(row: ReportRow): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        add(row, (err) => (err ? reject(err) : resolve()));
      });
    },

    enqueueMany(rows: ReportRow[]): Promise<(EnqueueError | undefined)[]> {
      return new Promise((resolve) => {
        const errors = new Array<EnqueueError | undefined>(rows.length);
        let left = rows.length;
        if (left === 0) return resolve(errors);
        for (let i = 0; i < rows.length; i++) {
          pending.push({
            row: rows[i] as ReportRow,
            done: (err) => {
              errors[i] = err;
              if (--left === 0) resolve(errors);
            },
          });
        }
        added();
      });
    },

    writeJob(shard: number, token: string, rows: ReportRow[]): Promise<void> {
      let failure: EnqueueError | undefined;
      const batch = rows.map((row) => ({ row, done: (err?: EnqueueError) => (failure = err) }));
      return start(shard, batch, token).then(() => {
        if (failure) throw failure;
      });
    },

    async drain(): Promise<void> {
      pump(true);
      while (inFlight.size > 0) {
        await Promise.all([...inFlight]);
        pump(true);
      }
    },
  };
}
