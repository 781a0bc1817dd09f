import { describe, expect, it } from "vitest";
import { createBurstAllowance } from "../../src/edge/burst-allowance.js";
import type { TakeTokens } from "../../src/edge/token-bucket.js";

// Edges share one token bucket. Here it is kept in memory with a clock the test moves: the same
// TakeTokens contract as the Redis script (refill at `rate`, up to `capacity`, grant what is
// there).

function memoryBucket(clock: { ms: number }) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  let calls = 0;
  const take: TakeTokens = async (key, rate, capacity, want) => {
    calls += 1;
    const b = buckets.get(key) ?? { tokens: capacity, at: clock.ms };
    b.tokens = Math.min(capacity, b.tokens + ((clock.ms - b.at) * rate) / 1000);
    b.at = clock.ms;
    const granted = Math.min(want, Math.floor(b.tokens));
    b.tokens -= granted;
    buckets.set(key, b);
    const msToNext = b.tokens < 1 ? Math.ceil(((1 - b.tokens) / rate) * 1000) : 0;
    return { granted, remaining: Math.floor(b.tokens), msToNext };
  };
  return { take, calls: () => calls };
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
});
