import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  createQuotaAllowance,
  type QuotaAllowance,
  type QuotaGrant,
  type QuotaOutcome,
} from "../../src/edge/quota-allowance.js";
import { type QuotaStore, quotaKeys, redisQuotaStore } from "../../src/edge/quota-counter.js";
import type { RedisClient } from "../../src/redis/connections.js";
import { keySlot } from "../../src/redis/key-slot.js";
import { memoryQuota as memoryModel } from "../helpers/memory-quota.js";

// Edges share one month's counter, kept in memory with the clock the test moves
// (test/helpers/memory-quota.ts: the Redis script's model, held to it by quota-store-cases.ts).

const KEY = "prj:2024-05";
const memoryQuota = () => memoryModel(KEY);

const isGrant = (o: QuotaOutcome): o is QuotaGrant => "refund" in o;

/**
 * Takes on behalf of reports and keeps the books: how many are accepted now (a refund counts
 * once it is back in the store), and every refusal answered while fewer than the quota were.
 */
function ledger(quota: number) {
  let accepted = 0;
  let most = 0;
  let lastRefundAt = Number.NEGATIVE_INFINITY;
  const early: { accepted: number; msAfterRefund: number }[] = [];
  const grants: QuotaGrant[] = [];
  const pending: Promise<QuotaOutcome>[] = [];
  return {
    take(edge: QuotaAllowance): Promise<QuotaOutcome> {
      const p = edge.take(KEY, quota).then((o) => {
        if (isGrant(o)) {
          accepted += 1;
          most = Math.max(most, accepted);
          grants.push(o);
        } else if (accepted < quota) {
          early.push({ accepted, msAfterRefund: Date.now() - lastRefundAt });
        }
        return o;
      });
      pending.push(p);
      return p;
    },
    async refund(grant: QuotaGrant) {
      await grant.refund();
      accepted -= 1;
      lastRefundAt = Date.now();
    },
    grants,
    all: () => Promise.all(pending),
    accepted: () => accepted,
    most: () => most,
    early,
  };
}

type Options = Omit<Parameters<typeof createQuotaAllowance>[0], "store" | "edgeId">;

const edges = (n: number, store: QuotaStore, opts: Options = {}): QuotaAllowance[] =>
  Array.from({ length: n }, (_, i) => createQuotaAllowance({ store, edgeId: `e${i}`, ...opts }));
const oneEdge = (store: QuotaStore, opts: Options = {}) => createQuotaAllowance({ store, ...opts });
const twoEdges = (store: QuotaStore, opts: Options = {}): [QuotaAllowance, QuotaAllowance] => [
  createQuotaAllowance({ store, edgeId: "a", ...opts }),
  createQuotaAllowance({ store, edgeId: "b", ...opts }),
];

/** The first of `xs`, which the test made sure exists. */
function first<T>(xs: T[]): T {
  const [x] = xs;
  if (x === undefined) throw new Error("nothing there");
  return x;
}

/** Moves the clock in steps, letting every timer and answer due on the way run. */
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

/** Moves the clock a millisecond at a time until `p` settles (a minute at most). */
async function settle<T>(p: Promise<T>): Promise<T> {
  let done = false;
  void p.finally(() => (done = true)).catch(() => {});
  for (let ms = 0; !done && ms < 60_000; ms++) await advance(1);
  return p;
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.UTC(2024, 4, 10, 12) });
});

afterEach(() => {
  vi.useRealTimers();
});

describe("quota allowance: round trips", () => {
  it("a busy project reserves in chunks: a call per hundreds of reports", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store);
    const l = ledger(1_000_000);
    // Two reports a millisecond for five seconds.
    for (let ms = 0; ms < 5_000; ms++) {
      void l.take(edge);
      void l.take(edge);
      await advance(1);
    }
    await advance(10);
    expect((await l.all()).every(isGrant)).toBe(true);
    expect(l.accepted()).toBe(10_000);
    expect(q.calls.length).toBeLessThan(10_000 / 100);
  });

  it("a quiet project asks once per report, as before, and holds nothing", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store);
    const l = ledger(3_000);
    for (let i = 0; i < 10; i++) {
      void l.take(edge);
      await advance(3_000);
    }
    expect((await l.all()).every(isGrant)).toBe(true);
    expect(q.calls).toHaveLength(10);
    expect(q.calls.every(({ call }) => call.want === 1)).toBe(true);
    expect(q.used()).toBe(10);
    expect(q.held()).toBe(0);
  });

  it("units left unused go back when the lease ends, and the edge forgets the project", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store, { leaseMs: 1_000 });
    const l = ledger(3_000);
    for (let i = 0; i < 100; i++) {
      void l.take(edge);
      await advance(2);
    }
    expect(edge.holding().get(KEY)).toBeGreaterThan(0);
    expect(q.used()).toBeGreaterThan(100);
    await advance(1_100);
    expect(edge.holding().size).toBe(0);
    expect(q.used()).toBe(100);
    expect(q.held()).toBe(0);
  });

  it("after a final refusal, refuses locally for a while; a refund on this edge ends that", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store, { refusalCacheMs: 1_000 });
    const l = ledger(3);
    for (let i = 0; i < 3; i++) void l.take(edge);
    await advance(5);
    const refused = l.take(edge);
    await advance(5);
    expect(await refused).toEqual({ used: 3 });
    const calls = q.calls.length;
    for (let i = 0; i < 20; i++) expect(isGrant(await l.take(edge))).toBe(false);
    expect(q.calls).toHaveLength(calls);

    const back = l.refund(first(l.grants));
    await advance(5);
    await back;
    expect(q.used()).toBe(2);
    const again = l.take(edge);
    await advance(5);
    expect(isGrant(await again)).toBe(true);
    // Past the cache, a refusal asks Redis again.
    await advance(1_000);
    const later = l.take(edge);
    await advance(5);
    expect(isGrant(await later)).toBe(false);
    expect(q.calls.length).toBeGreaterThan(calls + 2);
    expect(l.early).toEqual([]);
  });
});

describe("quota allowance: exact at the end of the quota", () => {
  it("reserves one unit per report waiting once little is left", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store, { spread: 16 });
    const l = ledger(40);
    for (let i = 0; i < 39; i++) {
      void l.take(edge);
      await advance(1);
      // Never more in hand than a sixteenth of what was left.
      expect(edge.holding().get(KEY) ?? 0).toBeLessThanOrEqual(Math.floor((40 - i) / 16));
    }
    await advance(5);
    expect(l.accepted()).toBe(39);
  });

  it("a report another edge's unused units can serve waits for them instead of a 429", async () => {
    const q = memoryQuota();
    const [a, b] = twoEdges(q.store, { leaseMs: 1_000 });
    const l = ledger(200);
    // B takes a few reports in a burst, reserves more than it uses, and goes quiet.
    for (let i = 0; i < 30; i++) {
      void l.take(b);
      await advance(2);
    }
    const heldByB = b.holding().get(KEY) ?? 0;
    expect(heldByB).toBeGreaterThan(0);
    // A takes everything else, one report after the other, well within B's lease.
    const started = Date.now();
    const outcomes: QuotaOutcome[] = [];
    for (let i = 0; i < 200 - 30; i++) outcomes.push(await settle(l.take(a)));
    expect(outcomes.every(isGrant)).toBe(true);
    expect(l.accepted()).toBe(200);
    // The last of them waited for B's lease to end, not for a refusal.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000 - 60);
    const over = l.take(a);
    await advance(5);
    expect(await over).toEqual({ used: 200 });
    expect(l.early).toEqual([]);
  });

  it("refuses at once when no other edge holds anything", async () => {
    const q = memoryQuota();
    const [a, b] = twoEdges(q.store);
    const l = ledger(5);
    for (let i = 0; i < 5; i++) {
      void l.take(i % 2 ? a : b);
      await advance(1_500);
    }
    const over = l.take(a);
    await advance(2);
    expect(await over).toEqual({ used: 5 });
  });

  it("stops waiting for an edge that died holding units once its lease and grace are over", async () => {
    const q = memoryQuota();
    const a = oneEdge(q.store, { leaseMs: 1_000, graceMs: 2_000 });
    const l = ledger(50);
    expect(q.dieHolding("dead", 10, 50).granted).toBe(10);
    for (let i = 0; i < 40; i++) void l.take(a);
    await advance(5);
    expect(l.accepted()).toBe(40);
    const started = Date.now();
    const over = l.take(a);
    let answered = false;
    void over.then(() => (answered = true));
    await advance(2_500);
    expect(answered).toBe(false);
    await advance(600);
    expect(await over).toEqual({ used: 50 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
    // Lost for the month, never given twice.
    expect(l.most()).toBe(40);
  });

  it("a refund goes straight back, where another edge can use it", async () => {
    const q = memoryQuota();
    const [a, b] = twoEdges(q.store);
    const l = ledger(3);
    for (let i = 0; i < 3; i++) void l.take(a);
    await advance(5);
    expect(l.accepted()).toBe(3);
    const back = l.refund(first(l.grants));
    await advance(5);
    await back;
    expect(q.used()).toBe(2);
    const fromB = l.take(b);
    await advance(5);
    expect(isGrant(await fromB)).toBe(true);
    // A refund given twice counts once.
    await first(l.grants).refund();
    expect(q.used()).toBe(3);
  });

  it("shutdown gives every unused unit back", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store);
    const l = ledger(3_000);
    for (let i = 0; i < 50; i++) {
      void l.take(edge);
      await advance(1);
    }
    expect(q.used()).toBeGreaterThan(50);
    const closed = edge.close();
    await advance(5);
    await closed;
    expect(q.used()).toBe(50);
    expect(q.held()).toBe(0);
  });

  it("a failed call refuses nothing: the reports waiting get the error, and nothing is counted twice", async () => {
    const q = memoryQuota();
    let failing = false;
    const store: QuotaStore = (key, edge, c) =>
      failing ? Promise.reject(new Error("redis down")) : q.store(key, edge, c);
    const edge = oneEdge(store);
    const l = ledger(100);
    failing = true;
    const p = edge.take(KEY, 100);
    await expect(p).rejects.toThrow("redis down");
    failing = false;
    const ok = l.take(edge);
    await advance(5);
    expect(isGrant(await ok)).toBe(true);
  });

  it("any interleaving of edges, reports, refunds and time: never over, never refused early", async () => {
    const op = fc.oneof(
      // n reports on one edge, `every` ms apart (0: all at once).
      fc.record({
        kind: fc.constant("reports" as const),
        edge: fc.nat(3),
        n: fc.integer({ min: 1, max: 40 }),
        every: fc.integer({ min: 0, max: 20 }),
      }),
      fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 1_500 }) }),
      fc.record({ kind: fc.constant("refund" as const), n: fc.integer({ min: 1, max: 5 }) }),
    );
    const refusalCacheMs = 1_000;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 200 }),
        fc.array(op, { minLength: 1, maxLength: 40 }),
        async (n, quota, ops) => {
          const q = memoryQuota();
          const all = edges(n, q.store, { refusalCacheMs });
          const l = ledger(quota);
          const refunds: Promise<void>[] = [];
          for (const o of ops) {
            if (o.kind === "reports") {
              for (let i = 0; i < o.n; i++) {
                void l.take(all[o.edge % n] ?? first(all));
                if (o.every > 0) await advance(o.every);
              }
              await advance(1);
            } else if (o.kind === "wait") {
              await advance(o.ms);
            } else {
              for (const g of l.grants.splice(0, o.n)) refunds.push(l.refund(g));
              await advance(1);
            }
            expect(q.used()).toBeLessThanOrEqual(quota);
          }
          // Every wait ends and every lease runs out.
          await advance(10_000);
          await l.all();
          await Promise.all(refunds);
          expect(l.most()).toBeLessThanOrEqual(quota);
          expect(q.used()).toBe(l.accepted());
          expect(q.held()).toBe(0);
          // A refusal while fewer than the quota were accepted: only the local cache after a
          // final refusal, missing a unit refunded on another edge meanwhile.
          for (const e of l.early) expect(e.msAfterRefund).toBeLessThanOrEqual(refusalCacheMs);
          const closed = Promise.all(all.map((edge) => edge.close()));
          await advance(5);
          await closed;
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("quota keys", () => {
  it("the counter keeps rate-limiter-flexible's name; its holders share its Cluster slot", () => {
    expect(quotaKeys("headroom:quota", "prj:2024-05")[0]).toBe("headroom:quota:prj:2024-05");
    fc.assert(
      fc.property(
        fc.constantFrom("headroom:quota", "{headroom}:quota", "x{tag}y:quota", "a{b:quota"),
        fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/),
        (prefix, project) => {
          const [counter, holders] = quotaKeys(prefix, `${project}:2024-05`);
          expect(holders).not.toBe(counter);
          expect(keySlot(holders)).toBe(keySlot(counter));
        },
      ),
    );
  });

  it("refuses a prefix whose braces no other key can match, before any report", () => {
    const untouched = {} as RedisClient;
    expect(() => redisQuotaStore(untouched, "x{}y:quota")).toThrow(/Cluster slot/);
    expect(() => redisQuotaStore(untouched, "x}y:quota")).toThrow(/Cluster slot/);
  });
});

describe("quota allowance: batches take several units at once", () => {
  it("a batch over what is left gets a prefix: exactly the quota, in one call", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store);
    const taken = await settle(edge.takeMany(KEY, 10, 25));
    expect(taken).toMatchObject({ granted: 10, used: 10 });
    expect(q.calls).toHaveLength(1);
    expect(q.used()).toBe(10);
  });

  it("batches on two edges at once never pass more than the quota, and all of it", async () => {
    const q = memoryQuota();
    const [a, b] = twoEdges(q.store);
    const outcomes = await settle(
      Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? b : a).takeMany(KEY, 100, 13))),
    );
    const granted = outcomes.reduce((n, o) => n + ("granted" in o ? o.granted : 0), 0);
    expect(granted).toBe(100);
    await advance(5_000);
    expect(q.used()).toBe(100);
  });

  it("units given back from a batch go to the next one", async () => {
    const q = memoryQuota();
    const edge = oneEdge(q.store);
    const first = await settle(edge.takeMany(KEY, 5, 5));
    if (!("granted" in first)) throw new Error("expected a grant");
    await settle(first.refund(2));
    expect(q.used()).toBe(3);
    const second = await settle(edge.takeMany(KEY, 5, 5));
    expect(second).toMatchObject({ granted: 2 });
  });
});
