import { describe, expect, it } from "vitest";
import { createKeyCache } from "../../src/keys/key-cache.js";
import type { KeyLookup } from "../../src/keys/key-store.js";

// The key cache bounds how long a revoked key works (its TTL), and holds a rotated-out secret
// no longer than its end: past `expiresAt` the store is asked again (and refuses it).

const lookup = (expiresAt?: number): KeyLookup => ({
  keyId: "key_x",
  projectId: "p",
  scope: "report",
  plan: "free",
  overrides: {},
  ...(expiresAt === undefined ? {} : { expiresAt }),
});

describe("key cache", () => {
  it("holds an answer for its TTL", async () => {
    let t = 1_000;
    let calls = 0;
    const cache = createKeyCache(
      async () => {
        calls += 1;
        return lookup();
      },
      { ttlMs: 500, now: () => t },
    );
    await cache("k");
    t += 499;
    await cache("k");
    expect(calls).toBe(1);
    t += 1;
    await cache("k");
    expect(calls).toBe(2);
  });

  it("never holds a rotated-out secret past its end", async () => {
    let t = 1_000;
    let calls = 0;
    const cache = createKeyCache(
      async () => {
        calls += 1;
        return lookup(1_100);
      },
      {
        ttlMs: 500,
        now: () => t,
      },
    );
    await cache("k");
    t = 1_099;
    expect(cache.peek?.("k")).toMatchObject({ keyId: "key_x" });
    t = 1_100;
    expect(cache.peek?.("k")).toBeUndefined();
    await cache("k");
    expect(calls).toBe(2);
  });
});
