// Gathers entries (jobs, each holding some rows) into batches and hands each batch to `deliver`:
// a batch is due when it holds `maxRows` rows, when every job slot of the worker is taken (waiting
// longer gains nothing), when its oldest entry is `maxWaitMs` old, or on close. At most
// `maxParallel` batches are delivered at once: the next one fills while one is being inserted.
// When the queue runs dry after full batches (the end of a backlog), what is in hand goes at once:
// no more is coming to fill it, and lingering would only delay the backlog's last rows.
// With `minWaitMs`, a batch also goes once its oldest entry is that old while fewer than
// `idleBelow` batches are being delivered (an insert slot is free): a group commit, so that under
// light load rows go in at once and under heavy load batches grow while the inserts are busy.

/** What made a batch due. */
export type CloseReason = "rows" | "jobs" | "wait" | "idle" | "drained" | "close";

export interface BatcherOptions<E> {
  maxRows: number;
  maxWaitMs: number;
  /** The worker's concurrency: with this many entries in hand, waiting for more is pointless. */
  maxEntries: number;
  /** Rows in hand (waiting and being delivered) at which the worker takes no more: the same. */
  maxRowsInHand?: number;
  maxParallel: number;
  /** Unset: a batch not full waits maxWaitMs (or a drained queue). */
  minWaitMs?: number;
  /** Deliveries under way below which a batch `minWaitMs` old goes (maxParallel if unset). */
  idleBelow?: number;
  /**
   * A batch goes early (`minWaitMs`) only this long after the previous batch went: a lone report
   * after a quiet spell goes at once, a steady flow once per this (0 if unset).
   */
  minIntervalMs?: number;
  rowsOf: (entry: E) => number;
  /** Settles once the batch is dealt with; a rejection is passed to `onFailed`. */
  deliver: (batch: E[]) => Promise<void>;
  onFailed: (batch: E[], err: Error) => void;
  /** A batch was made: why, and how long each of its entries waited in hand (ms). */
  onClose?: (reason: CloseReason, waitedMs: number[]) => void;
  now?: () => number;
}

export function createBatcher<E>(opts: BatcherOptions<E>) {
  const now = opts.now ?? Date.now;
  let pending: { entry: E; at: number }[] = [];
  let pendingRows = 0;
  let timer: NodeJS.Timeout | null = null;
  let timerAt = 0;
  const idleBelow = opts.idleBelow ?? opts.maxParallel;
  const inFlight = new Set<Promise<void>>();
  let inFlightEntries = 0;
  let inFlightRows = 0;
  let closing = false;
  /** The last batch went out full: a backlog is being worked through. */
  let backlog = false;
  /** The queue ran dry during a backlog: the next batch goes without lingering. */
  let dry = false;

  /** When the last batch was taken. */
  let lastTakenAt = Number.NEGATIVE_INFINITY;
  const oldestAt = () => pending[0]?.at ?? 0;
  /** The earliest a batch may go early: `minWaitMs` old, `minIntervalMs` after the last one. */
  const earlyAt = () =>
    Math.max(oldestAt() + (opts.minWaitMs as number), lastTakenAt + (opts.minIntervalMs ?? 0));
  const heldAll = () =>
    pending.length + inFlightEntries >= opts.maxEntries ||
    pendingRows + inFlightRows >= (opts.maxRowsInHand ?? Number.POSITIVE_INFINITY);
  const full = () => pendingRows >= opts.maxRows || heldAll();
  const idle = () => opts.minWaitMs !== undefined && inFlight.size < idleBelow;

  function dueFor(): CloseReason | null {
    if (closing) return "close";
    if (pendingRows >= opts.maxRows) return "rows";
    if (heldAll()) return "jobs";
    if (dry) return "drained";
    const age = now() - oldestAt();
    if (age >= opts.maxWaitMs) return "wait";
    if (idle() && now() >= earlyAt()) return "idle";
    return null;
  }

  function take(reason: CloseReason): E[] {
    const batch: E[] = [];
    const waited: number[] | null = opts.onClose ? [] : null;
    const t = now();
    lastTakenAt = t;
    let rows = 0;
    while (pending.length > 0) {
      const next = pending[0] as { entry: E; at: number };
      const size = opts.rowsOf(next.entry);
      if (batch.length > 0 && rows + size > opts.maxRows) break;
      pending.shift();
      batch.push(next.entry);
      waited?.push(t - next.at);
      rows += size;
    }
    pendingRows -= rows;
    if (waited) opts.onClose?.(reason, waited);
    return batch;
  }

  function schedule(): void {
    for (;;) {
      if (inFlight.size >= opts.maxParallel || pending.length === 0) break;
      const reason = dueFor();
      if (!reason) break;
      backlog = full();
      dry = false;
      const rowsBefore = pendingRows;
      const batch = take(reason);
      const rows = rowsBefore - pendingRows;
      inFlightEntries += batch.length;
      inFlightRows += rows;
      const delivery: Promise<void> = opts
        .deliver(batch)
        .catch((err: Error) => opts.onFailed(batch, err))
        .finally(() => {
          inFlight.delete(delivery);
          inFlightEntries -= batch.length;
          inFlightRows -= rows;
          schedule();
        });
      inFlight.add(delivery);
    }
    // With every delivery slot taken, the next to settle schedules again: no timer to spin on.
    if (pending.length === 0 || closing || inFlight.size >= opts.maxParallel) return;
    // The earliest the oldest entry can be due: early while a slot is free, else maxWaitMs old.
    const latest = oldestAt() + opts.maxWaitMs;
    const at = idle() ? Math.min(earlyAt(), latest) : latest;
    if (timer && timerAt <= at) return;
    if (timer) clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(
      () => {
        timer = null;
        schedule();
      },
      Math.max(0, at - now()),
    );
  }

  return {
    add(entry: E): void {
      pending.push({ entry, at: now() });
      pendingRows += opts.rowsOf(entry);
      schedule();
    },

    /** The queue had no job to give. */
    drained(): void {
      if (!backlog || pending.length === 0) return;
      dry = true;
      schedule();
    },

    /** Delivers everything in hand now, and resolves once no delivery is under way. */
    async flush(): Promise<void> {
      closing = true;
      if (timer) clearTimeout(timer);
      timer = null;
      while (inFlight.size > 0 || pending.length > 0) {
        schedule();
        await Promise.all([...inFlight]);
      }
    },

    /** Entries not yet handed to a delivery, removed from the batcher. */
    drop(): E[] {
      const left = pending.map((p) => p.entry);
      pending = [];
      pendingRows = 0;
      return left;
    },
  };
}
