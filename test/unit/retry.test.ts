import { afterEach, describe, expect, it, vi } from "vitest";
import { retryUntilDone, ShutdownAbort, shutdownSignal } from "../../src/lib/retry.js";

// Retrying passing failures until done, giving up at once on final ones, and stopping on
// shutdown — also while waiting between attempts.

class Final extends Error {}

const isFinal = (err: unknown) => err instanceof Final;

/** A function that fails with each given error in turn, then returns "done". */
function failing(...errors: Error[]) {
  let calls = 0;
  const fn = async () => {
    const err = errors[calls];
    calls += 1;
    if (err) throw err;
    return "done";
  };
  return { fn, calls: () => calls };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("retryUntilDone", () => {
  it("retries passing failures until the call succeeds", async () => {
    const { fn, calls } = failing(new Error("ECONNRESET"), new Error("503"), new Error("timeout"));
    const retries: number[] = [];
    const result = await retryUntilDone(fn, {
      isFinal,
      signal: shutdownSignal().signal,
      maxDelayMs: 2,
      onRetry: (_, attempt) => retries.push(attempt),
    });
    expect(result).toBe("done");
    expect(calls()).toBe(4);
    expect(retries).toEqual([1, 2, 3]);
  });

  it("throws a final error at once, without retrying or calling onRetry", async () => {
    const bad = new Final("cannot parse");
    const { fn, calls } = failing(new Error("ECONNRESET"), bad);
    const retries: unknown[] = [];
    const p = retryUntilDone(fn, {
      isFinal,
      signal: shutdownSignal().signal,
      maxDelayMs: 2,
      onRetry: (err) => retries.push(err),
    });
    await expect(p).rejects.toBe(bad);
    expect(calls()).toBe(2);
    expect(retries).toHaveLength(1);
  });

  it("rejects with ShutdownAbort when aborted during the wait between attempts", async () => {
    vi.useFakeTimers();
    const shutdown = shutdownSignal();
    const { fn, calls } = failing(...Array.from({ length: 100 }, () => new Error("down")));
    let firstRetry = () => {};
    const retrying = new Promise<void>((resolve) => {
      firstRetry = resolve;
    });
    const outcome = retryUntilDone(fn, {
      isFinal,
      signal: shutdown.signal,
      maxDelayMs: 60_000,
      onRetry: () => firstRetry(),
    }).then(
      () => "resolved",
      (err: unknown) => err,
    );
    await retrying;
    await vi.advanceTimersByTimeAsync(0);
    // The first attempt failed and its backoff timer is pending; no time passes from here on.
    expect(vi.getTimerCount()).toBe(1);
    shutdown.abort();
    expect(await outcome).toBeInstanceOf(ShutdownAbort);
    expect(calls()).toBe(1);
  });

  it("rejects with ShutdownAbort when the signal was aborted before the call", async () => {
    const shutdown = shutdownSignal();
    shutdown.abort();
    const { fn, calls } = failing();
    await expect(
      retryUntilDone(fn, { isFinal, signal: shutdown.signal, maxDelayMs: 2 }),
    ).rejects.toBeInstanceOf(ShutdownAbort);
    expect(calls()).toBe(0);
  });

  it("stops retrying once aborted while an attempt is under way", async () => {
    const shutdown = shutdownSignal();
    let calls = 0;
    const fn = async () => {
      calls += 1;
      shutdown.abort();
      throw new Error("ECONNRESET");
    };
    await expect(
      retryUntilDone(fn, { isFinal, signal: shutdown.signal, maxDelayMs: 2 }),
    ).rejects.toBeInstanceOf(ShutdownAbort);
    expect(calls).toBe(1);
  });
});
