// Waiting for a condition of local servers with a deadline, never for a fixed time.

export interface PollOptions {
  timeoutMs: number;
  intervalMs?: number;
}

/**
 * Calls `probe` until it returns a value other than undefined, and returns that value. A probe
 * that throws has not succeeded yet; after `timeoutMs` the error names `what` and the last reason
 * (the probe's last error), so a failure says which condition was not reached and why.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  { timeoutMs, intervalMs = 100 }: PollOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let reason = "never answered";
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      reason = "not yet";
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() + intervalMs > deadline) {
      throw new Error(`${what}: not reached within ${timeoutMs} ms (last: ${reason})`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
