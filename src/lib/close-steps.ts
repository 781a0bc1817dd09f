import type { Logger } from "pino";

// A shutdown's steps in order. One that is still waiting after `slowMs` says so, by name, while
// it waits: a shutdown that overruns its grace period then names the step that held it. A step
// given `giveUpMs` is left behind after that long (logged), for what a later start or another
// process makes good anyway — a job not acknowledged is delivered again, a manifest not released
// is swept — so that one hung connection cannot keep a process from stopping.

export type CloseStep = readonly [name: string, run: () => unknown, giveUpMs?: number];

export async function closeSteps(
  logger: Logger,
  steps: readonly CloseStep[],
  slowMs = 5_000,
): Promise<void> {
  for (const [step, run, giveUpMs] of steps) {
    const timers: NodeJS.Timeout[] = [];
    const after = (ms: number, fn: () => void) => {
      const t = setTimeout(fn, ms);
      t.unref();
      timers.push(t);
    };
    if (giveUpMs === undefined || giveUpMs > slowMs) {
      after(slowMs, () =>
        logger.warn({ step, waitedMs: slowMs }, "shutdown: still waiting for a step"),
      );
    }
    try {
      const running = Promise.resolve().then(run);
      if (giveUpMs === undefined) {
        await running;
        continue;
      }
      let left = false;
      const gaveUp = new Promise<void>((resolve) =>
        after(giveUpMs, () => {
          left = true;
          logger.warn({ step, waitedMs: giveUpMs }, "shutdown: gave up waiting for a step");
          resolve();
        }),
      );
      // Left behind, it may still fail: that is logged, not thrown at nobody.
      running.catch((err: unknown) => {
        if (left) logger.warn({ err, step }, "shutdown: a step left behind failed");
      });
      await Promise.race([running, gaveUp]);
    } finally {
      for (const t of timers) clearTimeout(t);
    }
  }
}
