import { describe, expect, it } from "vitest";
import { generateKey, hashKey } from "../../src/keys/key-format.js";
import {
  ADMIN_PROJECT,
  createKeyStore,
  KeyCapError,
  KeyStoreError,
} from "../../src/keys/key-store.js";
import type { RedisClient } from "../../src/redis/connections.js";

// The key store's rules over an in-memory stand-in for the few Redis commands it sends (strings,
// hashes, sets, SET NX PX for its lock, the lock's release script). Its behaviour on a real Redis,
// Cluster slots and concurrency across processes included, is tested in test/integration
// (control.*, keys.set-plan); here, its decisions: caps, rotation ends, plan changes, ids.

function memoryRedis() {
  const strings = new Map<string, string>();
  const hashes = new Map<string, Map<string, string>>();
  const sets = new Map<string, Set<string>>();
  const hash = (k: string) =>
    hashes.get(k) ?? (hashes.set(k, new Map()).get(k) as Map<string, string>);
  const set = (k: string) => sets.get(k) ?? (sets.set(k, new Set()).get(k) as Set<string>);
  const hset = (k: string, ...args: unknown[]) => {
    const fields =
      typeof args[0] === "object" ? Object.entries(args[0] as object) : [[args[0], args[1]]];
    for (const [f, v] of fields) hash(k).set(String(f), String(v));
    return fields.length;
  };
  const hdel = (k: string, ...fields: string[]) => fields.filter((f) => hash(k).delete(f)).length;
  const redis = {
    get: async (k: string) => strings.get(k) ?? null,
    async set(k: string, v: string, ...opts: unknown[]) {
      if (opts.includes("NX") && strings.has(k)) return null;
      strings.set(k, v);
      return "OK";
    },
    async eval(_script: string, _n: number, k: string, token: string) {
      if (strings.get(k) !== token) return 0;
      strings.delete(k);
      return 1;
    },
    hsetnx: async (k: string, f: string, v: string) => (hash(k).has(f) ? 0 : hset(k, f, v)),
    hset: async (k: string, ...args: unknown[]) => hset(k, ...args),
    hget: async (k: string, f: string) => hash(k).get(f) ?? null,
    hgetall: async (k: string) => Object.fromEntries(hash(k)),
    hmget: async (k: string, ...fs: string[]) => fs.map((f) => hash(k).get(f) ?? null),
    hdel: async (k: string, ...fs: string[]) => hdel(k, ...fs),
    sadd: async (k: string, ...ms: string[]) =>
      ms.filter((m) => !set(k).has(m) && set(k).add(m)).length,
    smembers: async (k: string) => [...set(k)],
    multi() {
      const ops: (() => unknown)[] = [];
      const tx = {
        hset(k: string, ...args: unknown[]) {
          ops.push(() => hset(k, ...args));
          return tx;
        },
        hdel(k: string, ...fs: string[]) {
          ops.push(() => hdel(k, ...fs));
          return tx;
        },
        exec: async () => ops.map((op) => [null, op()]),
      };
      return tx;
    },
  };
  return redis as unknown as RedisClient;
}

function setup() {
  let t = Date.parse("2026-11-01T00:00:00Z");
  const store = createKeyStore(memoryRedis(), "t", { now: () => t });
  return { store, advance: (ms: number) => (t += ms) };
}

const on = { defaultPlan: "free" };

describe("key store", () => {
  it("a created key is looked up by its secret, with its project's plan; a revoked one is not", async () => {
    const { store } = setup();
    const k = await store.create("acme", { ...on, plan: "pro", scope: "read" });
    expect(await store.lookup(k.key)).toMatchObject({
      keyId: k.keyId,
      projectId: "acme",
      scope: "read",
      plan: "pro",
    });
    expect(await store.lookup(`${k.key}x`)).toBeNull();
    await store.revoke(k.keyId);
    expect(await store.lookup(k.key)).toBeNull();
  });

  it("refuses a project id that is not 1-64 of letters, digits, . _ -", async () => {
    const { store } = setup();
    for (const bad of ["", "a".repeat(65), "a b", "*", "a:b"]) {
      await expect(store.create(bad, on), bad).rejects.toBeInstanceOf(KeyStoreError);
    }
    await expect(store.create("a".repeat(64), on)).resolves.toBeTruthy();
  });

  it("an admin key belongs to no project", async () => {
    const { store } = setup();
    const admin = await store.createAdmin();
    expect(admin.projectId).toBe(ADMIN_PROJECT);
    expect(await store.lookup(admin.key)).toMatchObject({ scope: "admin", projectId: "*" });
    expect(await store.listProjects()).toEqual([]);
    await expect(store.create("acme", { ...on, scope: "admin" })).rejects.toThrow(KeyStoreError);
  });

  it("with a cap, the keys not revoked stop at it, made at once included; a revocation frees one", async () => {
    const { store } = setup();
    const made = await Promise.allSettled(
      Array.from({ length: 5 }, () => store.create("acme", { ...on, max: 3 })),
    );
    expect(made.filter((r) => r.status === "fulfilled")).toHaveLength(3);
    const refused = made.filter((r) => r.status === "rejected");
    expect(refused).toHaveLength(2);
    for (const r of refused)
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(KeyCapError);
    expect(await store.countLive("acme")).toBe(3);
    await expect(
      store.import("acme", generateKey("report"), { ...on, max: 3 }),
    ).rejects.toBeInstanceOf(KeyCapError);
    const first = (made[0] as PromiseFulfilledResult<{ keyId: string }>).value;
    await store.revoke(first.keyId);
    expect(await store.countLive("acme")).toBe(2);
    await expect(store.create("acme", { ...on, max: 3 })).resolves.toBeTruthy();
    // Another project's keys are its own.
    await expect(store.create("other", { ...on, max: 3 })).resolves.toBeTruthy();
  });

  it("a rotation's old secret works until its overlap ends, every earlier one too; 0 ends them at once", async () => {
    const { store, advance } = setup();
    const k = await store.create("acme", on);
    const second = await store.rotate(k.keyId, 60);
    expect(second?.oldExpiresAt).toBe("2026-11-01T00:01:00.000Z");
    expect(await store.lookup(k.key)).not.toBeNull();
    advance(59_999);
    expect(await store.lookup(k.key)).not.toBeNull();
    advance(1);
    expect(await store.lookup(k.key)).toBeNull();
    const third = await store.rotate(k.keyId, 3_600);
    await store.rotate(k.keyId, 0);
    for (const old of [second?.key, third?.key])
      expect(await store.lookup(old as string)).toBeNull();
  });

  it("a revoked key is not rotated; revoking reaches every secret it had", async () => {
    const { store } = setup();
    const k = await store.create("acme", on);
    const next = await store.rotate(k.keyId, 3_600);
    await store.revoke(k.keyId);
    expect(await store.lookup(k.key)).toBeNull();
    expect(await store.lookup(next?.key as string)).toBeNull();
    expect(await store.rotate(k.keyId, 60)).toBeNull();
  });

  it("another plan drops the overrides not given; the same plan keeps them", async () => {
    const { store } = setup();
    await store.createProject("acme", "pro", { burst: 5, monthly: null });
    expect((await store.setPlan("acme", "pro", { capacity: 50 })).overrides).toEqual({
      burst: 5,
      monthly: null,
      capacity: 50,
    });
    expect((await store.setPlan("acme", "free", { burst: 7 })).overrides).toEqual({ burst: 7 });
    await expect(store.setPlan("acme", "free", { burst: 0 })).rejects.toThrow(KeyStoreError);
    await expect(store.setPlan("nope", "free")).rejects.toThrow(KeyStoreError);
    expect(await store.createProject("acme", "pro")).toBeNull();
  });

  it("stores hashes of secrets, never a secret", async () => {
    const redis = memoryRedis();
    const own = createKeyStore(redis, "t");
    const k = await own.create("acme", on);
    expect(await redis.get(`t:key-id:${k.keyId}`)).toBe(hashKey(k.key));
    expect(JSON.stringify(await redis.hgetall(`t:key:${hashKey(k.key)}`))).not.toContain(k.key);
  });
});
