import pRetry from "p-retry";

// Retrying what fails for a passing reason (network, ClickHouse down or overloaded) for as long as
// it takes, with capped exponential backoff and jitter, until it succeeds, fails for a reason
// retrying cannot fix, or the signal (shutdown) aborts it.

export class ShutdownAbort extends Error {
  override name = "ShutdownAbort";
}

export interface RetryOptions {
  /** Errors that no retry can fix: thrown at once. */
  isFinal: (err: unknown) => boolean;
  /** Aborted on shutdown: the wait stops and the call rejects with the signal's reason. */
  signal: AbortSignal;
  maxDelayMs: number;
  onRetry?: (err: unknown, attempt: number) => void;
}

export function retryUntilDone<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  return pRetry(fn, {
    retries: Number.POSITIVE_INFINITY,
    minTimeout: Math.min(200, opts.maxDelayMs),
    maxTimeout: opts.maxDelayMs,
    factor: 2,
    randomize: true,
    signal: opts.signal,
    shouldRetry: ({ error }) => !opts.isFinal(error),
    onFailedAttempt: ({ error, attemptNumber }) => {
      if (!opts.isFinal(error)) opts.onRetry?.(error, attemptNumber);
    },
  });
}

/** An AbortController whose abort rejects pending retries with a ShutdownAbort. */
export function shutdownSignal() {
  const controller = new AbortController();
  return {
    signal: controller.signal,
    abort: () => controller.abort(new ShutdownAbort("shutting down")),
  };
}
