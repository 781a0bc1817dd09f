import type { Logger } from "pino";

// A shutdown's steps in order. One that is still waiting after `slowMs` says so, by name, while
// it waits: a shutdown that overruns its grace period then names the step that held it.

export type CloseStep = readonly [name: string, run: () => unknown];

export async function closeSteps(
  logger: Logger,
  steps: readonly CloseStep[],
  slowMs = 5_000,
): Promise<void> {
  for (const [step, run] of steps) {
    const slow = setTimeout(
      () => logger.warn({ step, waitedMs: slowMs }, "shutdown: still waiting for a step"),
      slowMs,
    );
    slow.unref();
    try {
      await run();
    } finally {
      clearTimeout(slow);
    }
  }
}
