import { describe, expect, it } from "vitest";
import { createQueryCache } from "../../src/api/query-cache.js";

// The read API's query cache past its TTL: the last answer served while one refresh runs, for a
// bounded time; and a bounded number of answers, the least recently used dropped first.

/** A query whose runs are counted and settled by hand. */
function controlled() {
  const runs: { resolve(v: number): void; reject(e: Error): void }[] = [];
  const run = () =>
    new Promise<number>((resolve, reject) => {
      runs.push({ resolve, reject });
    });
  return { runs, run };
}

/** A cache with one refresh slot, whose runs are named by key, recorded and settled by hand. */
function oneSlot(staleMs: number) {
  const clock = { t: 0 };
  const cache = createQueryCache({
    ttlMs: 100,
    staleMs,
    backgroundRefreshes: 1,
    now: () => clock.t,
  });
  const started: string[] = [];
  const settle = new Map<string, (v: number) => void>();
  const runOf = (key: string) => () =>
    new Promise<number>((resolve) => {
      started.push(key);
      settle.set(key, resolve);
    });
  /** Holds answer 1 for each key, made at its time; then the clock is at `now`, nothing started. */
  const hold = async (made: Record<string, number>, now: number) => {
    for (const [key, at] of Object.entries(made)) {
      clock.t = at;
      const first = cache.get("p", key, runOf(key));
      settle.get(key)?.(1);
      await first;
    }
    started.length = 0;
    clock.t = now;
  };
  /** Settles `key`'s run with answer 2, and lets what follows from it run. */
  const finish = async (key: string) => {
    settle.get(key)?.(2);
    await new Promise((r) => setImmediate(r));
  };
  return { clock, cache, started, runOf, hold, finish };
}

describe("query cache: stale while revalidate", () => {
  it("serves the last answer past the TTL while one refresh runs, then the new one", async () => {
    let t = 0;
    const cache = createQueryCache({ ttlMs: 100, staleMs: 1_000, now: () => t });
    const q = controlled();
    const first = cache.get("p", "q", q.run);
    q.runs[0]?.resolve(1);
    expect(await first).toBe(1);
    t = 150;
    // Stale: both callers get 1 at once; one refresh only.
    expect(await Promise.all([cache.get("p", "q", q.run), cache.get("p", "q", q.run)])).toEqual([
      1, 1,
    ]);
    expect(q.runs).toHaveLength(2);
    q.runs[1]?.resolve(2);
    await Promise.resolve();
    await Promise.resolve();
    expect(await cache.get("p", "q", q.run)).toBe(2);
    expect(q.runs).toHaveLength(2);
  });

  it("keeps the old answer when a refresh fails, and never past the stale bound", async () => {
    let t = 0;
    const cache = createQueryCache({ ttlMs: 100, staleMs: 400, now: () => t });
    const q = controlled();
    const first = cache.get("p", "q", q.run);
    q.runs[0]?.resolve(1);
    await first;
    t = 200;
    expect(await cache.get("p", "q", q.run)).toBe(1);
    q.runs[1]?.reject(new Error("down"));
    await new Promise((r) => setImmediate(r));
    t = 300;
    expect(await cache.get("p", "q", q.run)).toBe(1);
    expect(q.runs).toHaveLength(3);
    q.runs[2]?.reject(new Error("down"));
    await new Promise((r) => setImmediate(r));
    // 500 = TTL + stale bound: the old answer is no longer served; callers wait for a run.
    t = 500;
    const waited = cache.get("p", "q", q.run);
    expect(q.runs).toHaveLength(4);
    q.runs[3]?.resolve(9);
    expect(await waited).toBe(9);
  });

  it("refreshes at most backgroundRefreshes stale answers at a time", async () => {
    let t = 0;
    const cache = createQueryCache({
      ttlMs: 100,
      staleMs: 1_000,
      backgroundRefreshes: 1,
      now: () => t,
    });
    const q = controlled();
    for (const key of ["a", "b"]) {
      const first = cache.get("p", key, q.run);
      q.runs.at(-1)?.resolve(1);
      await first;
    }
    t = 200;
    expect(await cache.get("p", "a", q.run)).toBe(1);
    expect(await cache.get("p", "b", q.run)).toBe(1);
    // `a` is being refreshed: `b` waits for the slot, served stale meanwhile.
    expect(q.runs).toHaveLength(3);
    q.runs[2]?.resolve(2);
    await new Promise((r) => setImmediate(r));
    expect(await cache.get("p", "b", q.run)).toBe(1);
    expect(q.runs).toHaveLength(4);
  });

  it("when a refresh ends, refreshes the waiting answer that stops being usable first", async () => {
    const { cache, started, runOf, hold, finish } = oneSlot(1_000);
    // Made at 0, 50 and 100 ms: usable until 1,100, 1,150 and 1,200 ms.
    await hold({ a: 0, b: 50, c: 100 }, 300);
    // `a` takes the one slot; `c` is asked before `b`, but `b` runs out sooner.
    for (const key of ["a", "c", "b"]) expect(await cache.get("p", key, runOf(key))).toBe(1);
    expect(started).toEqual(["a"]);
    await finish("a");
    // No poll in between: the slot went to `b` as soon as it was free, then to `c`.
    expect(started).toEqual(["a", "b"]);
    await finish("b");
    expect(started).toEqual(["a", "b", "c"]);
    await finish("c");
    for (const key of ["a", "b", "c"]) expect(await cache.get("p", key, runOf(key))).toBe(2);
    expect(started).toEqual(["a", "b", "c"]);
  });

  it("hands the slot on when a refresh fails, or throws before it starts", async () => {
    const { cache, started, runOf, hold, finish } = oneSlot(1_000);
    await hold({ a: 0, b: 0, c: 0 }, 200);
    const throwing = () => {
      started.push("a");
      throw new Error("refused before it ran");
    };
    const failing = () => {
      started.push("b");
      return Promise.reject(new Error("refused"));
    };
    expect(await cache.get("p", "a", throwing as () => Promise<number>)).toBe(1);
    expect(await cache.get("p", "b", failing)).toBe(1);
    expect(await cache.get("p", "c", runOf("c"))).toBe(1);
    await new Promise((r) => setImmediate(r));
    // a threw, b failed: each gave the slot to the next, and both are still served.
    expect(started).toEqual(["a", "b", "c"]);
    await finish("c");
    expect(await cache.get("p", "c", runOf("c"))).toBe(2);
    expect(await cache.peek("p", "a")).toBe(1);
  });

  it("forgets a waiting refresh whose answer is no longer usable", async () => {
    const { clock, cache, started, runOf, hold, finish } = oneSlot(400);
    await hold({ a: 0, b: 0 }, 200);
    await cache.get("p", "a", runOf("a"));
    await cache.get("p", "b", runOf("b"));
    expect(started).toEqual(["a"]);
    // `b` is past its 500 ms when the slot frees: not refreshed for no one.
    clock.t = 600;
    await finish("a");
    expect(started).toEqual(["a"]);
  });

  it("keeps at most maxEntries answers, dropping the least recently used", async () => {
    const cache = createQueryCache({ ttlMs: 10_000, maxEntries: 2, now: () => 0 });
    let runs = 0;
    const run = async () => ++runs;
    await cache.get("p", "a", run);
    await cache.get("p", "b", run);
    // `a` used again: `b` is now the least recently used, and goes when `c` comes.
    await cache.get("p", "a", run);
    await cache.get("p", "c", run);
    expect(runs).toBe(3);
    await cache.get("p", "a", run);
    expect(runs).toBe(3);
    await cache.get("p", "b", run);
    expect(runs).toBe(4);
  });

  it("peeks at a usable answer only, and counts the peek as a use", async () => {
    let t = 0;
    const cache = createQueryCache({ ttlMs: 100, maxEntries: 2, now: () => t });
    expect(cache.peek("p", "a")).toBeUndefined();
    await cache.get("p", "a", async () => "A");
    await cache.get("p", "b", async () => "B");
    expect(cache.peek("p", "a")).toBe("A");
    // `a` peeked at: `b` is the least recently used, and goes when `c` comes.
    await cache.get("p", "c", async () => "C");
    expect(cache.peek("p", "a")).toBe("A");
    expect(cache.peek("p", "b")).toBeUndefined();
    t = 100;
    expect(cache.peek("p", "a")).toBeUndefined();
  });

  it("gives a refresh the answer it replaces: none, a stale one, an expired one", async () => {
    let t = 0;
    const cache = createQueryCache({ ttlMs: 100, staleMs: 100, now: () => t });
    const given: (number | undefined)[] = [];
    let next = 0;
    const run = async (previous: number | undefined) => {
      given.push(previous);
      return ++next;
    };
    expect(await cache.get("p", "q", run)).toBe(1);
    t = 150; // stale: served, refreshed behind
    expect(await cache.get("p", "q", run)).toBe(1);
    await new Promise((r) => setImmediate(r));
    t = 1_000; // expired: the caller waits for a refresh, which still gets the old answer
    expect(await cache.get("p", "q", run)).toBe(3);
    expect(given).toEqual([undefined, 1, 2]);
  });

  it("makes a new answer at once when the held one is not current, TTL or not", async () => {
    const cache = createQueryCache({ ttlMs: 60_000, now: () => 0 });
    let version = 1;
    let runs = 0;
    const run = async () => ({ version, n: ++runs });
    const current = (held: { version: number }) => held.version === version;
    expect(await cache.get("p", "q", run, current)).toEqual({ version: 1, n: 1 });
    expect(await cache.get("p", "q", run, current)).toEqual({ version: 1, n: 1 });
    version = 2;
    expect(await cache.get("p", "q", run, current)).toEqual({ version: 2, n: 2 });
    expect(await cache.get("p", "q", run, current)).toEqual({ version: 2, n: 2 });
  });
});

describe("query cache: bounded by bytes, in all and per project", () => {
  // Sizes as sizeOf says, plus each entry's fixed overhead (512): a value's number is its bytes.
  const sized = (o: { maxBytes: number; projectShare?: number; maxEntries?: number }) => {
    let t = 0;
    const cache = createQueryCache({
      ttlMs: 1_000,
      sizeOf: (v) => v as number,
      now: () => t,
      ...o,
    });
    return { cache, at: (ms: number) => (t = ms) };
  };
  const value = (bytes: number) => async () => bytes - 512;

  it("holds at most maxBytes, the least recently used dropped first", async () => {
    const { cache } = sized({ maxBytes: 3_000 });
    for (const k of ["a", "b", "c"]) await cache.get("p", k, value(1_000));
    expect(cache.usage()).toEqual({ entries: 3, bytes: 3_000 });
    cache.peek("p", "a");
    await cache.get("p", "d", value(1_000));
    expect(cache.usage().bytes).toBe(3_000);
    expect(cache.peek("p", "b")).toBeUndefined();
    expect(cache.peek("p", "a")).toBe(488);
  });

  it("a project over its share drops its own answers, never another project's", async () => {
    const { cache } = sized({ maxBytes: 10_000, projectShare: 0.25 });
    await cache.get("victim", "v", value(2_000));
    for (let i = 0; i < 50; i++) await cache.get("hostile", `junk-${i}`, value(1_000));
    expect(cache.usage("hostile").bytes).toBeLessThanOrEqual(2_500);
    expect(cache.peek("victim", "v")).toBe(1_488);
    // Its newest answers are the ones it keeps.
    expect(cache.peek("hostile", "junk-49")).toBe(488);
    expect(cache.peek("hostile", "junk-0")).toBeUndefined();
  });

  it("a project's share of maxEntries bounds its entries too", async () => {
    const { cache } = sized({ maxBytes: 1_000_000, maxEntries: 8, projectShare: 0.25 });
    await cache.get("victim", "v", value(600));
    for (let i = 0; i < 20; i++) await cache.get("hostile", `junk-${i}`, value(600));
    expect(cache.usage("hostile").entries).toBe(2);
    expect(cache.peek("victim", "v")).toBe(88);
  });

  it("serves but never keeps an answer over a project's share", async () => {
    const { cache } = sized({ maxBytes: 4_000, projectShare: 0.5 });
    let runs = 0;
    const big = async () => {
      runs += 1;
      return 3_000;
    };
    expect(await cache.get("p", "big", big)).toBe(3_000);
    expect(await cache.get("p", "big", big)).toBe(3_000);
    expect(runs).toBe(2);
    expect(cache.usage()).toEqual({ entries: 0, bytes: 0 });
  });

  it("frees expired answers, not only stops serving them", async () => {
    const { cache, at } = sized({ maxBytes: 1_000_000 });
    for (const k of ["a", "b", "c"]) await cache.get("p", k, value(1_000));
    at(5_000);
    await cache.get("q", "other", value(1_000));
    expect(cache.usage()).toEqual({ entries: 1, bytes: 1_000 });
    expect(cache.usage("p")).toEqual({ entries: 0, bytes: 0 });
  });
});
