import { type RateLimiterAbstract, RateLimiterRes } from "rate-limiter-flexible";

// The burst limit without a Redis round trip per report: each edge reserves a small share of a
// project's per-second allowance at once (5%: 100 of 2,000 on the unlimited plan, 1 of 10 on the
// free plan, which stays exact) and hands it out locally until its window ends. The shared Redis
// counter still bounds the total across every edge; what one edge reserved and did not use in a
// window is lost for that window, so the limit can only err on the strict side.
//
// Once Redis says the window is used up, this edge refuses the project locally until the window
// ends, again without asking Redis.

interface Window {
  left: number;
  endsAt: number;
  /** Redis refused: nothing more in this window. */
  exhausted: boolean;
  consumed: number;
}

export function createBurstAllowance(opts: { share: number; now?: () => number }) {
  const now = opts.now ?? Date.now;
  const windows = new Map<string, Window>();
  const reserving = new Map<string, Promise<void>>();

  async function reserve(key: string, points: number, limiter: RateLimiterAbstract) {
    const chunk = Math.max(1, Math.floor(points * opts.share));
    try {
      const res = await limiter.consume(key, chunk);
      windows.set(key, {
        left: chunk,
        endsAt: now() + res.msBeforeNext,
        exhausted: false,
        consumed: res.consumedPoints,
      });
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      // Over the limit, but part of the chunk may still have been within it.
      const granted = Math.max(0, Math.min(chunk, points - (err.consumedPoints - chunk)));
      windows.set(key, {
        left: granted,
        endsAt: now() + err.msBeforeNext,
        exhausted: true,
        consumed: err.consumedPoints,
      });
    }
  }

  return {
    /** Null when the report may pass; otherwise the limiter's answer for the 429. */
    async take(
      key: string,
      points: number,
      limiter: RateLimiterAbstract,
    ): Promise<RateLimiterRes | null> {
      // Each pass either returns or waits for a reservation, which grants tokens or ends the
      // window; the bound only guards against a pathological race.
      for (let pass = 0; pass < 100; pass++) {
        const w = windows.get(key);
        const t = now();
        if (w && w.endsAt > t) {
          if (w.left > 0) {
            w.left -= 1;
            return null;
          }
          if (w.exhausted) return new RateLimiterRes(0, w.endsAt - t, w.consumed);
        }
        let pending = reserving.get(key);
        if (!pending) {
          pending = reserve(key, points, limiter).finally(() => reserving.delete(key));
          reserving.set(key, pending);
        }
        await pending;
      }
      return new RateLimiterRes(0, 1_000, points);
    },
  };
}
