import { RateLimiterMemory } from "rate-limiter-flexible";
import { describe, expect, it } from "vitest";
import { createBurstAllowance } from "../../src/edge/burst-allowance.js";

// Two edges share one counter (a RateLimiterMemory stands in for Redis: the same limiter API).

async function grants(points: number, requests: number) {
  const shared = new RateLimiterMemory({ points, duration: 60 });
  const edges = [createBurstAllowance({ share: 0.05 }), createBurstAllowance({ share: 0.05 })];
  const results = await Promise.all(
    Array.from({ length: requests }, (_, i) => edges[i % 2]?.take("project", points, shared)),
  );
  return results.filter((r) => r === null).length;
}

describe("burst allowance", () => {
  it("is exact for small bursts (a chunk of one)", async () => {
    expect(await grants(10, 50)).toBe(10);
    expect(await grants(2, 5)).toBe(2);
  });

  it("never grants more than the burst across edges, and wastes at most a chunk per edge", async () => {
    const granted = await grants(2_000, 5_000);
    expect(granted).toBeLessThanOrEqual(2_000);
    expect(granted).toBeGreaterThanOrEqual(2_000 - 2 * 100);
  });

  it("answers a refusal with the time left in the window, without asking again", async () => {
    const limiter = new RateLimiterMemory({ points: 1, duration: 60 });
    let calls = 0;
    const counting = Object.assign(Object.create(limiter), {
      consume: (...args: Parameters<typeof limiter.consume>) => {
        calls += 1;
        return limiter.consume(...args);
      },
    });
    const edge = createBurstAllowance({ share: 0.05 });
    expect(await edge.take("p", 1, counting)).toBeNull();
    const refused = await edge.take("p", 1, counting);
    expect(refused?.remainingPoints).toBe(0);
    expect(refused?.msBeforeNext).toBeGreaterThan(50_000);
    for (let i = 0; i < 10; i++) await edge.take("p", 1, counting);
    expect(calls).toBe(2);
  });
});
