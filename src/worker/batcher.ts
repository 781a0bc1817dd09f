// Gathers entries (jobs, each holding some rows) into batches and hands each batch to `deliver`:
// a batch is due when it holds `maxRows` rows, when every job slot of the worker is taken (waiting
// longer gains nothing), when its oldest entry is `maxWaitMs` old, or on close. At most
// `maxParallel` batches are delivered at once: the next one fills while one is being inserted.
// When the queue runs dry after full batches (the end of a backlog), what is in hand goes at once:
// no more is coming to fill it, and lingering would only delay the backlog's last rows.

export interface BatcherOptions<E> {
  maxRows: number;
  maxWaitMs: number;
  /** The worker's concurrency: with this many entries in hand, waiting for more is pointless. */
  maxEntries: number;
  maxParallel: number;
  rowsOf: (entry: E) => number;
  /** Settles once the batch is dealt with; a rejection is passed to `onFailed`. */
  deliver: (batch: E[]) => Promise<void>;
  onFailed: (batch: E[], err: Error) => void;
  now?: () => number;
}

export function createBatcher<E>(opts: BatcherOptions<E>) {
  const now = opts.now ?? Date.now;
  let pending: { entry: E; at: number }[] = [];
  let pendingRows = 0;
  let timer: NodeJS.Timeout | null = null;
  const inFlight = new Set<Promise<void>>();
  let inFlightEntries = 0;
  let closing = false;
  /** The last batch went out full: a backlog is being worked through. */
  let backlog = false;
  /** The queue ran dry during a backlog: the next batch goes without lingering. */
  let dry = false;

  const oldestAt = () => pending[0]?.at ?? 0;
  const full = () =>
    pendingRows >= opts.maxRows || pending.length + inFlightEntries >= opts.maxEntries;
  const due = () => full() || closing || dry || now() - oldestAt() >= opts.maxWaitMs;

  function take(): E[] {
    const batch: E[] = [];
    let rows = 0;
    while (pending.length > 0) {
      const next = pending[0] as { entry: E };
      const size = opts.rowsOf(next.entry);
      if (batch.length > 0 && rows + size > opts.maxRows) break;
      pending.shift();
      batch.push(next.entry);
      rows += size;
    }
    pendingRows -= rows;
    return batch;
  }

  function schedule(): void {
    while (inFlight.size < opts.maxParallel && pending.length > 0 && due()) {
      backlog = full();
      dry = false;
      const batch = take();
      inFlightEntries += batch.length;
      const delivery: Promise<void> = opts
        .deliver(batch)
        .catch((err: Error) => opts.onFailed(batch, err))
        .finally(() => {
          inFlight.delete(delivery);
          inFlightEntries -= batch.length;
          schedule();
        });
      inFlight.add(delivery);
    }
    if (timer || pending.length === 0 || closing) return;
    timer = setTimeout(
      () => {
        timer = null;
        schedule();
      },
      Math.max(0, oldestAt() + opts.maxWaitMs - now()),
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
