// Polls for a condition instead of sleeping a fixed time: `fn` is retried until it returns
// without throwing; after the deadline the last failure is rethrown, so the test says why.

export interface EventuallyOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

export async function eventually<T>(
  fn: () => T | Promise<T>,
  { timeoutMs = 5_000, intervalMs = 25 }: EventuallyOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() + intervalMs > deadline) {
        if (err instanceof Error) {
          err.message = `still failing after ${timeoutMs} ms: ${err.message}`;
        }
        throw err;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
