import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { keySlot, SLOTS } from "../../src/redis/key-slot.js";

// Exact slots as `CLUSTER KEYSLOT` of redis-server 7.0.15 gives them, edge cases of hash tags
// included (test/unit/shards.test.ts has the specification's examples; the integration
// test redis-topologies.test.ts compares random keys with a live cluster).

describe("key slot, as the server computes it", () => {
  it.each([
    ["foo", 12182],
    ["somekey", 11058],
    ["{user1000}.following", 3443],
    ["{user1000}.followers", 3443],
    ["{headroom}:ingest", 11749],
    ["héllo", 11061],
    ["", 0],
    // An empty tag does not count: the whole key is hashed.
    ["foo{}{bar}", 8363],
    ["{}foo", 9500],
    ["{}}", 14790],
    // The tag ends at the first } after the first {.
    ["foo{{bar}}zap", 4015],
    ["foo{bar}{zap}", 5061],
    // No closing brace, or a closing brace only before the opening one.
    ["a{b", 13340],
    ["}{x}", 16287],
  ])("%s → %i", (key, slot) => {
    expect(keySlot(key)).toBe(slot);
  });

  it("puts every key with the same non-empty tag in the tag's slot", () => {
    const noBraces = fc.string().filter((s) => !s.includes("{") && !s.includes("}"));
    fc.assert(
      fc.property(
        noBraces,
        noBraces.filter((s) => s.length > 0),
        fc.string(),
        (pre, tag, post) => {
          const slot = keySlot(`${pre}{${tag}}${post}`);
          expect(slot).toBe(keySlot(tag));
          expect(slot).toBeGreaterThanOrEqual(0);
          expect(slot).toBeLessThan(SLOTS);
        },
      ),
    );
  });
});
