// Bounded waiting: poll a condition at an interval until it holds or the deadline passes.

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** True when `check` held before `timeoutMs`; a check that throws counts as "not yet". */
export async function pollUntil(
  check: () => Promise<boolean>,
  opts: { timeoutMs: number; intervalMs: number },
): Promise<boolean> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    try {
      if (await check()) return true;
    } catch {
      // not yet
    }
    if (Date.now() + opts.intervalMs > deadline) return false;
    await sleep(opts.intervalMs);
  }
}
