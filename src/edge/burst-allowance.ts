import type { BucketTake, TakeTokens } from "./token-bucket.js";

// The burst limit without a Redis round trip per report: each edge takes a small share of a
// project's per-second rate from the shared token bucket at once (5%: 100 of 2,000 on the
// unlimited plan, 1 of 10 on the free plan, which stays exact) and hands the tokens out locally.
// Reports that arrive while a take is under way wait for it, and the next take asks for all of
// them at once, so a refusal always means the bucket had no whole token left.
//
// Tokens in hand are spent within `holdMs` of their take, or go back to the bucket with the next
// one (a full bucket caps them), as they do when the project's limit changes: an edge never
// holds tokens for later, so all edges together pass at most the bucket's size plus what they
// took in the last `holdMs`. Once the bucket is empty, this edge refuses the project locally
// until the next token is due, without asking Redis.

export interface BurstLimit {
  rate: number;
  capacity: number;
}

/** A refusal: what the 429 says. */
export interface BurstRefusal {
  msToNext: number;
}

interface Waiter {
  resolve: (outcome: BurstRefusal | null) => void;
  reject: (err: unknown) => void;
}

interface Pool {
  limit: BurstLimit;
  /** Tokens in hand, and when they were taken. */
  left: number;
  takenAt: number;
  /** Tokens to give back with the next take. */
  back: number;
  /** The bucket was empty: nothing more before this time. */
  emptyUntil: number;
  waiters: Waiter[];
  taking: boolean;
}

const sameLimit = (a: BurstLimit, b: BurstLimit) => a.rate === b.rate && a.capacity === b.capacity;

export function createBurstAllowance(opts: {
  take: TakeTokens;
  share: number;
  /** How long tokens in hand may be spent after their take. */
  holdMs?: number;
  now?: () => number;
}) {
  const now = opts.now ?? Date.now;
  const holdMs = opts.holdMs ?? 1_000;
  const pools = new Map<string, Pool>();

  /** Takes tokens until every waiter is served or refused. */
  async function refill(key: string, pool: Pool) {
    pool.taking = true;
    while (pool.waiters.length > 0) {
      const { rate, capacity } = pool.limit;
      const serve = pool.waiters.length;
      const want = Math.max(serve, Math.floor(rate * opts.share), 1);
      const back = pool.back;
      pool.back = 0;
      let got: BucketTake;
      try {
        got = await opts.take(key, rate, capacity, want, back);
      } catch (err) {
        // Whether Redis took them is unknown: tokens given back stay given.
        for (const w of pool.waiters.splice(0, serve)) w.reject(err);
        continue;
      }
      const t = now();
      pool.left += got.granted;
      pool.takenAt = t;
      const served = pool.waiters.splice(0, Math.min(pool.left, pool.waiters.length));
      pool.left -= served.length;
      for (const w of served) w.resolve(null);
      if (got.granted < want) {
        // Fewer than asked: the bucket has no whole token left.
        pool.emptyUntil = t + Math.max(1, got.msToNext);
        for (const w of pool.waiters.splice(0)) w.resolve({ msToNext: pool.emptyUntil - t });
      }
    }
    pool.taking = false;
    if (pool.left === 0 && pool.back === 0 && pool.emptyUntil <= now()) pools.delete(key);
  }

  return {
    /** Null when the report may pass; otherwise when the next token is due. */
    take(key: string, limit: BurstLimit): Promise<BurstRefusal | null> {
      const t = now();
      let pool = pools.get(key);
      if (!pool) {
        pool = { limit, left: 0, takenAt: t, back: 0, emptyUntil: 0, waiters: [], taking: false };
        pools.set(key, pool);
      }
      const changed = !sameLimit(pool.limit, limit);
      if (pool.left > 0 && (changed || t - pool.takenAt >= holdMs)) {
        pool.back += pool.left;
        pool.left = 0;
      }
      if (changed) {
        pool.limit = limit;
        pool.emptyUntil = 0;
      }
      if (pool.left > 0) {
        pool.left -= 1;
        return Promise.resolve(null);
      }
      if (pool.emptyUntil > t) return Promise.resolve({ msToNext: pool.emptyUntil - t });
      const waiting = pool;
      return new Promise((resolve, reject) => {
        waiting.waiters.push({ resolve, reject });
        if (!waiting.taking) void refill(key, waiting);
      });
    },

    /** Tokens in hand, per project: for tests. */
    holding(): Map<string, number> {
      return new Map([...pools].map(([key, pool]) => [key, pool.left]));
    },
  };
}
