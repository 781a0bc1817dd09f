import type { BucketTake, TakeTokens } from "./token-bucket.js";

// The burst limit without a Redis round trip per report: each edge takes a small share of a
// project's per-second rate from the shared token bucket at once (5%: 100 of 2,000 on the
// unlimited plan, 1 of 10 on the free plan, which stays exact) and hands the tokens out locally.
// The bucket in Redis still bounds the total across every edge; tokens an edge took and has not
// used yet are only ever fewer reports, never more.
//
// Once the bucket is empty, this edge refuses the project locally until the next token is due,
// again without asking Redis.

interface Pool {
  left: number;
  /** The bucket was empty: nothing more before this time. */
  emptyUntil: number;
  remaining: number;
}

export interface BurstLimit {
  rate: number;
  capacity: number;
}

/** A refusal: what the 429 says. */
export interface BurstRefusal {
  msToNext: number;
}

export function createBurstAllowance(opts: {
  take: TakeTokens;
  share: number;
  now?: () => number;
}) {
  const now = opts.now ?? Date.now;
  const pools = new Map<string, Pool>();
  const taking = new Map<string, Promise<void>>();

  async function refill(key: string, limit: BurstLimit) {
    const want = Math.max(1, Math.floor(limit.rate * opts.share));
    const got: BucketTake = await opts.take(key, limit.rate, limit.capacity, want);
    const pool = pools.get(key) ?? { left: 0, emptyUntil: 0, remaining: 0 };
    pool.left += got.granted;
    pool.remaining = got.remaining;
    pool.emptyUntil = got.granted === 0 ? now() + Math.max(1, got.msToNext) : 0;
    pools.set(key, pool);
  }

  return {
    /** Null when the report may pass; otherwise when the next token is due. */
    async take(key: string, limit: BurstLimit): Promise<BurstRefusal | null> {
      // Each pass either returns or waits for a refill, which grants tokens or marks the bucket
      // empty; the bound only guards against a pathological race.
      for (let pass = 0; pass < 100; pass++) {
        const pool = pools.get(key);
        if (pool && pool.left > 0) {
          pool.left -= 1;
          return null;
        }
        const t = now();
        if (pool && pool.emptyUntil > t) return { msToNext: pool.emptyUntil - t };
        let pending = taking.get(key);
        if (!pending) {
          pending = refill(key, limit).finally(() => taking.delete(key));
          taking.set(key, pending);
        }
        await pending;
      }
      return { msToNext: 1_000 };
    },
  };
}
