import { describe, expect, it } from "vitest";
import { shardNames } from "../../src/queue/shards.js";
import { hashTag, keySlot, SLOTS } from "../../src/redis/key-slot.js";

describe("key slots (Redis Cluster specification)", () => {
  it("matches the slots Redis gives", () => {
    // Values from `redis-cli CLUSTER KEYSLOT <key>` and the specification's examples.
    expect(keySlot("foo")).toBe(12182);
    expect(keySlot("123456789")).toBe(12739);
    expect(keySlot("{user1000}.following")).toBe(keySlot("{user1000}.followers"));
    expect(keySlot("{user1000}.following")).toBe(keySlot("user1000"));
  });

  it("hashes the whole key when the braces hold nothing", () => {
    expect(hashTag("foo{}{bar}")).toBe("foo{}{bar}");
    expect(hashTag("foo{{bar}}zap")).toBe("{bar");
    expect(hashTag("foo{bar}{zap}")).toBe("bar");
  });
});

describe("queue shards", () => {
  const base = { prefix: "{headroom}", name: "reports" };

  it("is the plain queue with one shard", () => {
    expect(shardNames(base, 1)).toEqual([base]);
  });

  it.each([2, 3, 5, 16])("puts %i shards in the equal ranges of the slot space, in order", (n) => {
    const shards = shardNames(base, n);
    expect(new Set(shards.map((s) => s.prefix)).size).toBe(n);
    shards.forEach((s, i) => {
      const slot = keySlot(`${s.prefix}:${s.name}:wait`);
      expect(slot).toBeGreaterThanOrEqual(Math.floor((i * SLOTS) / n));
      expect(slot).toBeLessThan(Math.floor(((i + 1) * SLOTS) / n));
      expect(s.prefix).toMatch(/^\{headroom-\d+\}$/);
      expect(s.name).toBe("reports");
    });
  });

  it("is the same for the same settings (every edge and worker agrees)", () => {
    expect(shardNames(base, 3)).toEqual(shardNames({ ...base }, 3));
  });
});
