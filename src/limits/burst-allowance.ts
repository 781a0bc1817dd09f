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

/** What a take of several tokens got: all of them, or as many as the bucket had. */
export interface BurstGrant {
  granted: number;
  /** When fewer than asked were granted: until the next token. */
  msToNext: number;
}

interface Waiter {
  /** Tokens still wanted, and tokens given so far. */
  want: number;
  got: number;
  resolve: (outcome: BurstGrant) => void;
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
      let wanted = 0;
      for (const w of pool.waiters) wanted += w.want;
      const want = Math.max(wanted, Math.floor(rate * opts.share), 1);
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
      // In arrival order: a batch is served in full before the next waiter gets any.
      while (pool.left > 0 && pool.waiters.length > 0) {
        const w = pool.waiters[0] as Waiter;
        const give = Math.min(pool.left, w.want);
        pool.left -= give;
        w.got += give;
        w.want -= give;
        if (w.want > 0) break;
        pool.waiters.shift();
        w.resolve({ granted: w.got, msToNext: 0 });
      }
      if (got.granted < want) {
        // Fewer than asked: the bucket has no whole token left.
        pool.emptyUntil = t + Math.max(1, got.msToNext);
        const msToNext = pool.emptyUntil - t;
        for (const w of pool.waiters.splice(0)) w.resolve({ granted: w.got, msToNext });
      }
    }
    pool.taking = false;
    if (pool.left === 0 && pool.back === 0 && pool.emptyUntil <= now()) pools.delete(key);
  }

  /** The project's pool, its tokens in hand given back when stale or when its limit changed. */
  function poolOf(key: string, limit: BurstLimit, t: number): Pool {
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
    return pool;
  }

  /**
   * Up to `n` tokens (a batch of reports): all of them, or fewer only when the bucket has no
   * whole token left.
   */
  function takeMany(key: string, limit: BurstLimit, n: number): Promise<BurstGrant> {
    const t = now();
    const pool = poolOf(key, limit, t);
    // Tokens in hand go to those waiting first.
    const inHand = pool.waiters.length === 0 ? Math.min(pool.left, n) : 0;
    pool.left -= inHand;
    if (inHand === n) return Promise.resolve({ granted: n, msToNext: 0 });
    if (pool.emptyUntil > t) {
      return Promise.resolve({ granted: inHand, msToNext: pool.emptyUntil - t });
    }
    return new Promise((resolve, reject) => {
      pool.waiters.push({ want: n - inHand, got: inHand, resolve, reject });
      if (!pool.taking) void refill(key, pool);
    });
  }

  return {
    takeMany,

    /**
     * One token from those in hand, at once: false when there is none (or others wait for
     * them), and `take` must ask.
     */
    takeInHand(key: string, limit: BurstLimit): boolean {
      const pool = poolOf(key, limit, now());
      if (pool.left === 0 || pool.waiters.length > 0) return false;
      pool.left -= 1;
      return true;
    },

    /** Null when the report may pass; otherwise when the next token is due. */
    async take(key: string, limit: BurstLimit): Promise<BurstRefusal | null> {
      const { granted, msToNext } = await takeMany(key, limit, 1);
      return granted === 1 ? null : { msToNext };
    },

    /** Tokens in hand, per project: for tests. */
    holding(): Map<string, number> {
      return new Map([...pools].map(([key, pool]) => [key, pool.left]));
    },
  };
}
