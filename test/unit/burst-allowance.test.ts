import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createBurstAllowance } from "../../src/limits/burst-allowance.js";
import type { TakeTokens } from "../../src/limits/token-bucket.js";

// Edges share one token bucket. Here it is kept in memory with a clock the test moves: the same
// TakeTokens contract as the Redis script (refill at `rate`, up to `capacity`, with the tokens
// given back, grant what is there).

function memoryBucket(clock: { ms: number }) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  let calls = 0;
  const take: TakeTokens = async (key, rate, capacity, want, back) => {
    calls += 1;
    const b = buckets.get(key) ?? { tokens: capacity, at: clock.ms };
    b.tokens = Math.min(capacity, b.tokens + ((clock.ms - b.at) * rate) / 1000 + back);
    b.at = clock.ms;
    const granted = Math.min(want, Math.floor(b.tokens));
    b.tokens -= granted;
    buckets.set(key, b);
    const msToNext = b.tokens < 1 ? Math.ceil(((1 - b.tokens) / rate) * 1000) : 0;
    return { granted, remaining: Math.floor(b.tokens), msToNext };
  };
  return { take, calls: () => calls, tokens: (key: string) => buckets.get(key)?.tokens };
}

async function passed(
  edges: ReturnType<typeof createBurstAllowance>[],
  n: number,
  rate: number,
  capacity: number,
) {
  const results = await Promise.all(
    Array.from({ length: n }, (_, i) => edges[i % edges.length]?.take("p", { rate, capacity })),
  );
  return results.filter((r) => r === null).length;
}

describe("burst allowance over a shared token bucket", () => {
  it("lets a start-up burst up to the bucket's size through at once, and no more", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edges = [0, 1].map(() =>
      createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms }),
    );
    // The free plan: 10 a second, 50 at once. 15 hints and 5 calls pass; a flood is cut at 50.
    expect(await passed(edges, 20, 10, 50)).toBe(20);
    expect(await passed(edges, 100, 10, 50)).toBe(30);
  });

  it("refills at its rate: a sustained flood gets the rate, not the size", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edge = createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms });
    expect(await passed([edge], 60, 10, 50)).toBe(50);
    let later = 0;
    for (let s = 0; s < 10; s++) {
      clock.ms += 1_000;
      later += await passed([edge], 100, 10, 50);
    }
    expect(later).toBe(100);
  });

  it("never grants more than the bucket across edges, and keeps at most a chunk per edge", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edges = [0, 1].map(() =>
      createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms }),
    );
    const granted = await passed(edges, 15_000, 2_000, 10_000);
    expect(granted).toBeLessThanOrEqual(10_000);
    expect(granted).toBeGreaterThanOrEqual(10_000 - 2 * 100);
  });

  it("answers a refusal with the time to the next token, without asking again before it", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edge = createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms });
    expect(await edge.take("p", { rate: 1, capacity: 1 })).toBeNull();
    const refused = await edge.take("p", { rate: 1, capacity: 1 });
    expect(refused?.msToNext).toBe(1_000);
    for (let i = 0; i < 10; i++) await edge.take("p", { rate: 1, capacity: 1 });
    expect(bucket.calls()).toBe(2);
    clock.ms += 1_000;
    expect(await edge.take("p", { rate: 1, capacity: 1 })).toBeNull();
  });

  it("takes tokens for every report waiting at once: a bucket with tokens never refuses", async () => {
    // Burst 25, capacity 125: 125 reports arriving together all pass, in two round trips.
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edge = createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms });
    expect(await passed([edge], 125, 25, 125)).toBe(125);
    expect(bucket.calls()).toBe(2);
  });

  it("at any rate and size, on one or two edges, refuses only when the bucket is empty", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 2_000 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 2 }),
        fc.double({ min: 0, max: 2.5, noNaN: true }),
        async (rate, factor, edgeCount, load) => {
          const capacity = rate * factor;
          const n = Math.max(1, Math.round(capacity * load));
          const clock = { ms: 0 };
          const bucket = memoryBucket(clock);
          const edges = Array.from({ length: edgeCount }, () =>
            createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms }),
          );
          const ok = await passed(edges, n, rate, capacity);
          const held = edges.reduce((sum, e) => sum + (e.holding().get("p") ?? 0), 0);
          const left = bucket.tokens("p") ?? capacity;
          // Every token is passed, held or still in the bucket (the clock stands still).
          expect(ok + held + left).toBe(capacity);
          if (ok < n) expect(left).toBeLessThan(1);
          // One edge holds nothing back from its own reports; another edge's chunk is the most
          // a report can miss.
          if (edgeCount === 1) expect(ok).toBe(Math.min(n, capacity));
          else expect(ok).toBeGreaterThanOrEqual(Math.min(n, capacity - rate * 0.05));
        },
      ),
      { numRuns: 200 },
    );
  });

  it("gives tokens back once held too long: a later flood gets the bucket's size, no more", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edge = createBurstAllowance({
      take: bucket.take,
      share: 0.05,
      holdMs: 1_000,
      now: () => clock.ms,
    });
    // The pro plan: 200 a second, 1,000 at once; one report takes a chunk of 10.
    expect(await passed([edge], 1, 200, 1_000)).toBe(1);
    expect(edge.holding().get("p")).toBe(9);
    // Within the hold, the chunk is spent without a round trip.
    clock.ms += 999;
    expect(await passed([edge], 1, 200, 1_000)).toBe(1);
    expect(bucket.calls()).toBe(1);
    // An hour later the bucket is full again: the 8 tokens held go back to it, capped.
    clock.ms += 3_600_000;
    expect(await passed([edge], 2_000, 200, 1_000)).toBe(1_000);
  });

  it("gives tokens back when the project's limit changes", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edge = createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms });
    expect(await passed([edge], 1, 50_000, 50_000)).toBe(1);
    expect(edge.holding().get("p")).toBe(2_499);
    // Moved to the free plan: its bucket of 50, not the tokens taken under the old one.
    expect(await passed([edge], 120, 10, 50)).toBe(50);
  });
});

describe("burst allowance: batches take several tokens at once", () => {
  it("a batch over the bucket gets exactly what the bucket holds, in one take", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edge = createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms });
    const got = await edge.takeMany("p", { rate: 10, capacity: 50 }, 80);
    expect(got).toEqual({ granted: 50, msToNext: 100 });
    expect(bucket.calls()).toBe(1);
    // Empty now: refused locally until the next token is due.
    expect(await edge.takeMany("p", { rate: 10, capacity: 50 }, 5)).toMatchObject({ granted: 0 });
    expect(bucket.calls()).toBe(1);
  });

  it("batches at once on two edges: the bucket's size passes, in arrival order", async () => {
    const clock = { ms: 0 };
    const bucket = memoryBucket(clock);
    const edges = [0, 1].map(() =>
      createBurstAllowance({ take: bucket.take, share: 0.05, now: () => clock.ms }),
    );
    const grants = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        edges[i % 2]?.takeMany("p", { rate: 100, capacity: 120 }, 20),
      ),
    );
    const granted = grants.map((g) => g?.granted ?? 0);
    expect(granted.reduce((a, b) => a + b, 0)).toBe(120);
    // Per edge, a batch is served in full before the next gets any.
    for (const edge of [0, 1]) {
      const own = granted.filter((_, i) => i % 2 === edge);
      const firstShort = own.findIndex((g) => g < 20);
      if (firstShort >= 0) expect(own.slice(firstShort + 1).every((g) => g === 0)).toBe(true);
    }
  });
});
