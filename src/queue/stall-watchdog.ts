// Notices a worker that has stopped taking jobs although jobs are waiting and it has room for
// them, and asks for a recovery. The case it exists for: Redis restarted (or failed over, or a
// NAT forgot the flow) without the worker's TCP connections being reset. They then look open
// and swallow commands forever; ioredis never reconnects and BullMQ's fetch loop waits on a
// reply that will not come. Reconnecting fixes it; noticing it is this module's job.
//
// Stalled means, for `stallMs`: no job started or finished here, fewer jobs held than the
// worker's concurrency, and jobs waiting in the queue (read over a connection of the watchdog's
// own, so a dead worker connection cannot hide them).

export interface StallWatchdogOptions {
  /** Jobs waiting for any worker; may reject or time out (then nothing is decided). */
  waiting: () => Promise<number>;
  /** Grows whenever this worker starts or finishes a job. */
  progress: () => number;
  /** Whether this worker could take another job now. */
  hasRoom: () => boolean;
  stallMs: number;
  intervalMs: number;
  recover: (info: { waiting: number; idleMs: number }) => Promise<void>;
  now?: () => number;
}

export interface StallWatchdog {
  check: () => Promise<boolean>;
  start(): void;
  stop(): Promise<void>;
  recoveries: () => number;
}

export function createStallWatchdog(opts: StallWatchdogOptions): StallWatchdog {
  const now = opts.now ?? Date.now;
  let lastProgress = opts.progress();
  let lastProgressAt = now();
  let timer: NodeJS.Timeout | null = null;
  let checking: Promise<void> | null = null;
  let recoveries = 0;

  /** One look; resolves to whether it asked for a recovery. */
  async function check(): Promise<boolean> {
    const progress = opts.progress();
    if (progress !== lastProgress || !opts.hasRoom()) {
      // Working, or full: not stalled. A full worker waits on its own jobs, not on Redis.
      lastProgress = progress;
      lastProgressAt = now();
      return false;
    }
    const idleMs = now() - lastProgressAt;
    if (idleMs < opts.stallMs) return false;
    let waiting: number;
    try {
      waiting = await opts.waiting();
    } catch {
      return false;
    }
    if (waiting === 0 || opts.progress() !== lastProgress) return false;
    recoveries += 1;
    lastProgressAt = now();
    await opts.recover({ waiting, idleMs });
    return true;
  }

  const schedule = () => {
    timer = setTimeout(() => {
      checking = check()
        .then(() => undefined)
        .catch(() => undefined)
        .finally(() => {
          checking = null;
          if (timer) schedule();
        });
    }, opts.intervalMs);
    timer.unref();
  };

  return {
    check,
    start() {
      if (!timer) schedule();
    },
    async stop() {
      if (timer) clearTimeout(timer);
      timer = null;
      await checking;
    },
    recoveries: () => recoveries,
  };
}
