import { randomBytes } from "node:crypto";
import type { QuotaStore } from "./quota-counter.js";

// The monthly quota without a Redis round trip per report, and exact at its end.
//
// Each edge reserves units of a project's month from the counter in Redis (quota-counter.ts) and
// hands them out locally. A reservation is sized by what the edge used over the last round trip,
// scaled to one lease (a second by default): a busy project costs about one call a lease, a
// quiet one reserves one unit per report, as before. Exactness:
//
// - Never more than the quota: the counter counts every unit reserved, and Redis grants only
//   what is left under the quota. An edge gives back only units it never handed out; a unit
//   whose fate is unknown (a call that failed half way) is never taken back.
// - The last reports are not refused early. Units beyond the reports waiting at the moment are
//   granted only up to 1/`spread` of what is left, so reservations shrink as the month runs out
//   and near the end an edge reserves exactly one unit per report waiting. Units an edge holds
//   unused go back to Redis when its lease ends, at shutdown, and at once when a report fails to
//   enqueue. Redis knows who holds what: when a reservation finds the quota used up while other
//   edges hold units still on lease, the refusal is not final; the report waits for those leases
//   to end (the script says when) and asks again. A refusal is final only when nothing is held
//   elsewhere, or what is held is past its lease by `graceMs` (an edge that died holding units:
//   they are lost for the month, never given twice).
// - After a final refusal the edge refuses the project locally for `refusalCacheMs`, so reports
//   over the quota cost no round trip either. A unit given back on this edge ends that; one given
//   back on another edge (its enqueue failed) is seen here only when that time is over.

export interface QuotaAllowanceOptions {
  store: QuotaStore;
  /** This edge's name in Redis; random by default. */
  edgeId?: string;
  /** How long units are held before the unused ones go back (and the reservation's horizon). */
  leaseMs?: number;
  /** How late an edge may be in giving units back before others stop waiting for them. */
  graceMs?: number;
  /** A reservation beyond the reports waiting takes at most 1/spread of what is left. */
  spread?: number;
  /** The most units reserved at once. */
  maxChunk?: number;
  /** How long a final refusal is answered locally. */
  refusalCacheMs?: number;
  /** Between asks while waiting for another edge's units to come back. */
  retryMs?: number;
}

/** A unit of the quota for one report; `refund` gives it back if the report was not taken. */
export interface QuotaGrant {
  refund: () => Promise<void>;
}

export interface QuotaRefusal {
  /** The month's counter when the quota was found used up. */
  used: number;
}

/** Redis's clock is in another month than the key's: ask that month's key instead. */
export interface QuotaElsewhere {
  month: string;
}

export type QuotaOutcome = QuotaGrant | QuotaRefusal | QuotaElsewhere;

/** Units for a batch of reports: all asked for, or fewer once the quota is used up. */
export interface QuotaBatchGrant {
  granted: number;
  /** The month's counter when the quota fell short. */
  used: number;
  /** Gives `units` of those granted back, for reports that were not taken. */
  refund: (units: number) => Promise<void>;
}

interface Waiter {
  since: number;
  /** Units still wanted, and units given so far. */
  want: number;
  got: number;
  resolve: (outcome: QuotaBatchGrant | QuotaElsewhere) => void;
  reject: (err: unknown) => void;
}

interface Pool {
  key: string;
  monthly: number;
  /** Units in hand, unused. */
  left: number;
  /** Units to give back at the next call, and the refunds waiting for it. */
  back: number;
  refunds: (() => void)[];
  /** Redis lists this edge as holding units of the month. */
  held: boolean;
  /** Units in hand go back at this time. */
  leaseEnd: number;
  waiters: Waiter[];
  /** Waiters wait for other edges' units until then. */
  retryAt: number;
  running: Promise<void> | null;
  timer: NodeJS.Timeout | null;
  /** Units handed out, and that count and the time at the last reservation: the edge's rate. */
  handed: number;
  handedAtCall: number;
  calledAt: number;
  refusedUntil: number;
  used: number;
}

interface Call {
  sentAt: number;
  want: number;
  serve: number;
  /** Waiters the call is for. */
  waiting: number;
  giveBack: number;
  keep: number;
  refunds: (() => void)[];
}

export interface QuotaAllowance {
  edgeId: string;
  /**
   * One unit of the month `key` (`<project>:<YYYY-MM>`, whose quota is `monthly`), a refusal
   * once the quota is used up, or the month Redis is in when it is another. Rejects when Redis
   * fails.
   */
  take(key: string, monthly: number): Promise<QuotaOutcome>;
  takeMany: (key: string, monthly: number, n: number) => Promise<QuotaBatchGrant | QuotaElsewhere>;
  /** Units in hand, per month key: for tests and metrics. */
  holding(): Map<string, number>;
  /** Gives every unused unit back (shutdown); units refunded later go back at once. */
  close(): Promise<void>;
}

export function createQuotaAllowance(opts: QuotaAllowanceOptions): QuotaAllowance {
  const edgeId = opts.edgeId ?? randomBytes(8).toString("hex");
  const leaseMs = opts.leaseMs ?? 1_000;
  const graceMs = opts.graceMs ?? 2_000;
  const spread = opts.spread ?? 16;
  const maxChunk = opts.maxChunk ?? 1_000;
  const refusalCacheMs = opts.refusalCacheMs ?? leaseMs;
  const retryMs = opts.retryMs ?? 25;
  // A report waits for other edges' units no longer than their lease and grace allow.
  const maxWaitMs = leaseMs + graceMs + 1_000;
  const pools = new Map<string, Pool>();
  let closing = false;

  function poolFor(key: string, monthly: number): Pool {
    let pool = pools.get(key);
    if (!pool) {
      pool = {
        key,
        monthly,
        left: 0,
        back: 0,
        refunds: [],
        held: false,
        leaseEnd: 0,
        waiters: [],
        retryAt: 0,
        running: null,
        timer: null,
        handed: 0,
        handedAtCall: 0,
        calledAt: Number.NEGATIVE_INFINITY,
        refusedUntil: 0,
        used: 0,
      };
      pools.set(key, pool);
    }
    return pool;
  }

  function grant(from: Pool, granted: number, used = 0): QuotaBatchGrant {
    const { key, monthly } = from;
    let left = granted;
    return {
      granted,
      used,
      refund(units) {
        const back = Math.min(units, left);
        if (back <= 0) return Promise.resolve();
        left -= back;
        // Straight back to Redis: another edge may be waiting for them.
        const pool = poolFor(key, monthly);
        pool.refusedUntil = 0;
        pool.back += back;
        return new Promise<void>((resolve) => {
          pool.refunds.push(resolve);
          void sync(pool);
        });
      },
    };
  }

  /** Units that were given to waiters now answered otherwise go back with the next call. */
  function unwind(pool: Pool, waiters: Waiter[]) {
    for (const w of waiters) pool.back += w.got;
  }

  /** Units a reservation asks for beyond the reports waiting: the last round trip's rate. */
  function predicted(pool: Pool, t: number): number {
    const elapsed = Math.max(t - pool.calledAt, leaseMs / 10);
    return Math.ceil(((pool.handed - pool.handedAtCall) / elapsed) * leaseMs);
  }

  /** The next call the pool needs, if any. */
  function plan(pool: Pool): Call | null {
    const t = Date.now();
    const expired = closing || t >= pool.leaseEnd;
    let serve = 0;
    const waiting = pool.retryAt > t ? 0 : pool.waiters.length;
    for (const w of pool.waiters.slice(0, waiting)) serve += w.want;
    const returning = expired ? pool.left : 0;
    const giveBack = pool.back + returning;
    if (serve === 0 && giveBack === 0 && !(expired && pool.held)) return null;
    pool.left -= returning;
    pool.back = 0;
    let want = 0;
    if (serve > 0) {
      // Reports waiting are never cut by maxChunk: a batch asks for all of its units at once.
      want = Math.max(serve, Math.min(maxChunk, predicted(pool, t)));
      pool.calledAt = t;
      pool.handedAtCall = pool.handed;
    }
    return {
      sentAt: t,
      want,
      serve,
      waiting,
      giveBack,
      keep: pool.left,
      refunds: pool.refunds.splice(0),
    };
  }

  async function call(pool: Pool, c: Call): Promise<void> {
    let reply: Awaited<ReturnType<QuotaStore>>;
    try {
      reply = await opts.store(pool.key, edgeId, {
        monthly: pool.monthly,
        want: c.want,
        serve: c.serve,
        giveBack: c.giveBack,
        keep: c.keep,
        spread,
        leaseMs,
        graceMs,
      });
    } catch (err) {
      // Whether Redis applied it is unknown: units asked for are not ours, units given back
      // stay given. What Redis lists for this edge goes stale on its own.
      pool.held = false;
      const failed = pool.waiters.splice(0, c.waiting);
      unwind(pool, failed);
      for (const w of failed) w.reject(err);
      for (const done of c.refunds) done();
      return;
    }
    pool.used = reply.used;
    // In arrival order: a batch gets all its units before the next waiter gets any.
    let units = reply.granted;
    while (units > 0 && pool.waiters.length > 0) {
      const w = pool.waiters[0] as Waiter;
      const give = Math.min(units, w.want);
      units -= give;
      w.got += give;
      w.want -= give;
      pool.handed += give;
      if (w.want > 0) break;
      pool.waiters.shift();
      w.resolve(grant(pool, w.got));
    }
    pool.left += units;
    for (const done of c.refunds) done();
    pool.held = c.keep + Math.max(0, reply.granted - c.serve) > 0;
    if (pool.held) pool.leaseEnd = c.sentAt + leaseMs;
    if (reply.otherMonth !== undefined) {
      // By Redis's clock the month has turned (or not yet): the reports waiting count there.
      const month = reply.otherMonth;
      const moved = pool.waiters.splice(0, c.waiting);
      unwind(pool, moved);
      for (const w of moved) w.resolve({ month });
      return;
    }
    if (reply.granted >= c.serve || pool.waiters.length === 0) return;
    // The quota fell short of the reports waiting.
    const t = Date.now();
    const oldest = pool.waiters[0]?.since ?? t;
    if (reply.othersHeld > 0 && t - oldest < maxWaitMs) {
      pool.retryAt = t + reply.msToReturn + retryMs;
      return;
    }
    pool.refusedUntil = t + refusalCacheMs;
    for (const w of pool.waiters.splice(0)) w.resolve(grant(pool, w.got, reply.used));
  }

  /** Makes the calls the pool needs, one at a time; then sets its timer. */
  function sync(pool: Pool): Promise<void> {
    if (pool.running) return pool.running;
    pool.running = (async () => {
      for (let c = plan(pool); c; c = plan(pool)) await call(pool, c);
    })().finally(() => {
      pool.running = null;
      schedule(pool);
    });
    return pool.running;
  }

  /** Wakes the pool when a lease ends or a wait is over; forgets it once it has been idle. */
  function schedule(pool: Pool) {
    if (pool.timer) clearTimeout(pool.timer);
    pool.timer = null;
    const t = Date.now();
    let at = Number.POSITIVE_INFINITY;
    if (pool.left > 0 || pool.held) at = pool.leaseEnd;
    if (pool.waiters.length > 0) at = Math.min(at, pool.retryAt);
    if (at === Number.POSITIVE_INFINITY) {
      // Idle: the pool is kept a lease long for its rate, or while it answers refusals.
      const keep = Math.max(pool.refusedUntil, pool.calledAt + leaseMs);
      if (keep > t) at = keep;
    }
    if (at === Number.POSITIVE_INFINITY) {
      if (pools.get(pool.key) === pool && pool.back === 0) pools.delete(pool.key);
      return;
    }
    pool.timer = setTimeout(
      () => {
        pool.timer = null;
        void sync(pool);
      },
      Math.max(0, at - t),
    );
    pool.timer.unref();
  }

  /**
   * Up to `n` units of the month `key` (`<project>:<YYYY-MM>`, whose quota is `monthly`): fewer
   * only once the quota is used up; or the month Redis is in when it is another. Rejects when
   * Redis fails.
   */
  function takeMany(
    key: string,
    monthly: number,
    n: number,
  ): Promise<QuotaBatchGrant | QuotaElsewhere> {
    const pool = poolFor(key, monthly);
    pool.monthly = monthly;
    const inHand = pool.waiters.length === 0 ? Math.min(pool.left, n) : 0;
    pool.left -= inHand;
    pool.handed += inHand;
    if (inHand === n) return Promise.resolve(grant(pool, n));
    const t = Date.now();
    if (pool.refusedUntil > t) return Promise.resolve(grant(pool, inHand, pool.used));
    return new Promise((resolve, reject) => {
      pool.waiters.push({ since: t, want: n - inHand, got: inHand, resolve, reject });
      void sync(pool);
    });
  }

  return {
    edgeId,

    async take(key: string, monthly: number): Promise<QuotaOutcome> {
      const taken = await takeMany(key, monthly, 1);
      if ("month" in taken) return taken;
      return taken.granted === 1 ? { refund: () => taken.refund(1) } : { used: taken.used };
    },

    takeMany,

    holding(): Map<string, number> {
      return new Map([...pools].map(([key, pool]) => [key, pool.left]));
    },

    async close(): Promise<void> {
      closing = true;
      await Promise.all([...pools.values()].map((pool) => sync(pool)));
    },
  };
}
