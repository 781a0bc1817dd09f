import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { Cluster, Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { answersPing, startRedisServer } from "../../src/local/redis-server.js";
import { createWorkerRedis, type RedisClient } from "../../src/redis/connections.js";
import { keySlot } from "../../src/redis/key-slot.js";
import { redisTopology } from "../../src/redis/topology.js";
import { eventually } from "../helpers/eventually.js";
import { type RedisCluster, startRedisCluster } from "../helpers/redis-topology/redis-cluster.js";
import type { RedisNode } from "../helpers/redis-topology/redis-processes.js";
import { startRedisReplica } from "../helpers/redis-topology/redis-replica.js";
import { startRedisSentinel } from "../helpers/redis-topology/redis-sentinel.js";

// The local topologies the failover tests run on, on real redis-server processes: a Cluster
// that forms and fails over, a Sentinel deployment that fails over, a standalone replica; each
// seen through the ioredis clients Headroom uses. Every process is stopped after each test.

const cleanups: (() => unknown)[] = [];

afterEach(async () => {
  const errors: unknown[] = [];
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length > 0) throw errors[0];
});

/** Within this a client has found the promoted node by itself (a failover takes ~2.5 s here). */
const CLIENT_RECOVERS_MS = 20_000;

const hostPorts = (list: string) =>
  list.split(",").map((address) => {
    const [host = "", port = ""] = address.split(":");
    return { host, port: Number(port) };
  });

function connect(url: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on("error", () => {});
  cleanups.push(() => redis.disconnect());
  return redis;
}

function clusterClient(cluster: RedisCluster): Cluster {
  const client = new Cluster(hostPorts(cluster.seeds), {
    redisOptions: { ...(cluster.password ? { password: cluster.password } : {}) },
  });
  client.on("error", () => {});
  cleanups.push(() => client.disconnect());
  return client;
}

/** A client as Headroom's processes build theirs, from the topology's settings. */
function headroomClient(env: { REDIS_CLUSTER_NODES: string } | { REDIS_SENTINELS: string }) {
  const client: RedisClient = createWorkerRedis(redisTopology(loadConfig(env)));
  client.on("error", () => {});
  cleanups.push(() => client.disconnect());
  return client;
}

/** ROLE of a replica: ["slave", host, port, state, offset]. */
async function replicates(node: RedisNode): Promise<number> {
  const reply = (await connect(node.url).call("ROLE")) as [string, string, number];
  expect(reply[0]).toBe("slave");
  return reply[2];
}

describe("a local Redis Cluster", () => {
  it("forms with every slot served by one of three primaries, each with its replica, and keys on the primary of their slot", async () => {
    const cluster = await startRedisCluster();
    cleanups.push(() => cluster.stop());
    expect(cluster.nodes).toHaveLength(6);
    expect(cluster.seeds.split(",")).toStrictEqual(cluster.nodes.map((n) => n.address));

    // One key per primary: hash tags tried until each of the three primaries has one.
    const keyOf = new Map<string, string>();
    const tag = randomUUID();
    for (let i = 0; keyOf.size < 3 && i < 1_000; i++) {
      const key = `{${tag}-${i}}:value`;
      const primary = await cluster.primaryOf(key);
      if (!keyOf.has(primary.id)) keyOf.set(primary.id, key);
    }
    expect(keyOf.size).toBe(3);
    const primaries = cluster.nodes.filter((n) => keyOf.has(n.id));
    for (const primary of primaries) {
      expect(
        await connect(primary.url)
          .call("ROLE")
          .then((r) => (r as string[])[0]),
      ).toBe("master");
      expect(await replicates(await cluster.replicaOf(primary))).toBe(primary.port);
    }

    const client = clusterClient(cluster);
    for (const [id, key] of keyOf) await client.set(key, id);
    for (const primary of primaries) {
      const direct = connect(primary.url);
      for (const [id, key] of keyOf) {
        if (id === primary.id) expect(await direct.get(key)).toBe(id);
        else await expect(direct.get(key)).rejects.toThrow(/^MOVED /);
      }
    }

    // Our slot function agrees with the server's, braces and non-ASCII included.
    const direct = connect(cluster.nodes[0]?.url ?? "");
    const char = fc.oneof(
      fc.constantFrom("{", "}", "a"),
      fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: char, maxLength: 12 }), async (key) => {
        expect(await direct.call("CLUSTER", "KEYSLOT", key)).toBe(keySlot(key));
      }),
      { numRuns: 200 },
    );

    await cluster.stop();
    for (const node of cluster.nodes)
      expect(await answersPing(node.url).catch(() => false)).toBe(false);
  });

  it("promotes the replica of a SIGKILLed primary; a Cluster client follows; the old primary comes back as its replica", async () => {
    const cluster = await startRedisCluster({ password: `pw-${randomUUID()}` });
    cleanups.push(() => cluster.stop());
    const client = clusterClient(cluster);
    const key = `{${randomUUID()}}:value`;
    const primary = await cluster.primaryOf(key);
    const replica = await cluster.replicaOf(primary);

    // WAIT counts the writes of its own connection, and a pipeline's keyless commands go to the
    // node of its keys: with the replica hung, the write is not acknowledged by it.
    await cluster.pause(replica);
    expect(await client.pipeline().set(key, "unreplicated").wait(1, 300).exec()).toStrictEqual([
      [null, "OK"],
      [null, 0],
    ]);
    cluster.resume(replica);
    // Replicated before the kill.
    const written = await client.pipeline().set(key, "before").wait(1, 5_000).exec();
    expect(written).toStrictEqual([
      [null, "OK"],
      [null, 1],
    ]);

    await cluster.kill(primary);
    expect(cluster.isRunning(primary)).toBe(false);
    const promoted = await cluster.waitForPromotion(primary);
    expect(promoted.id).toBe(replica.id);
    expect((await cluster.primaryOf(key)).id).toBe(replica.id);

    await eventually(
      async () => {
        expect(await client.get(key)).toBe("before");
        await client.set(key, "after");
      },
      { timeoutMs: CLIENT_RECOVERS_MS, intervalMs: 100 },
    );
    expect(await connect(promoted.url).get(key)).toBe("after");

    // Headroom's own client, given the cluster's settings (password included), follows too.
    expect(await headroomClient(cluster.env).get(key)).toBe("after");

    await cluster.restart(primary);
    expect(await replicates(primary)).toBe(promoted.port);
    expect((await cluster.replicasOf(promoted)).map((n) => n.id)).toStrictEqual([primary.id]);
    // It copied the promoted node's data (a cluster replica answers reads after READONLY).
    const old = connect(primary.url);
    await old.call("READONLY");
    await eventually(async () => expect(await old.get(key)).toBe("after"), { timeoutMs: 10_000 });
  });
});

describe("a local Sentinel deployment", () => {
  it("fails a SIGKILLed primary over to its replica; a client given the sentinels writes to the new primary; the old one comes back as its replica", {
    timeout: 120_000,
  }, async () => {
    // Down after 3 s, as failover.redis's sentinels: a fresh-clone CI run (the Node 24 leg, the
    // machine loaded) found the restarted former primary still a primary after 30 s, which a
    // second failover would explain: a sentinel's PING waiting over 1 s on a loaded machine.
    const sentinel = await startRedisSentinel({
      password: `pw-${randomUUID()}`,
      downAfterMs: 3_000,
    });
    cleanups.push(() => sentinel.stop());
    expect(sentinel.nodes).toHaveLength(2);
    expect(sentinel.sentinels.split(",")).toHaveLength(3);
    const [first, replica] = sentinel.nodes;
    if (!first || !replica) throw new Error("a primary and a replica expected");
    expect(await sentinel.primary()).toStrictEqual(first);
    expect(await replicates(replica)).toBe(first.port);

    const client = new Redis({
      sentinels: hostPorts(sentinel.sentinels),
      name: sentinel.name,
      password: sentinel.password,
    });
    client.on("error", () => {});
    cleanups.push(() => client.disconnect());
    const key = `${randomUUID()}:value`;
    await sentinel.pause(replica);
    await client.set(key, "unreplicated");
    expect(await client.wait(1, 300)).toBe(0);
    sentinel.resume(replica);
    await client.set(key, "before");
    expect(await client.wait(1, 5_000)).toBe(1);

    await sentinel.kill(first);
    const promoted = await sentinel.waitForFailover(first);
    expect(promoted).toStrictEqual(replica);

    await eventually(
      async () => {
        expect(await client.get(key)).toBe("before");
        await client.set(key, "after");
      },
      { timeoutMs: CLIENT_RECOVERS_MS, intervalMs: 100 },
    );
    expect(await connect(promoted.url).get(key)).toBe("after");

    expect(await headroomClient(sentinel.env).get(key)).toBe("after");

    await sentinel.restart(first);
    // Restarted as the replica of the primary the sentinels named; a sentinel that had not yet
    // caught up would let it start as a primary, which the sentinels demote within about 20 s.
    await eventually(async () => expect(await replicates(first)).toBe(promoted.port), {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    const old = connect(first.url);
    await eventually(async () => expect(await old.get(key)).toBe("after"), { timeoutMs: 10_000 });

    await sentinel.stop();
    for (const node of [...sentinel.nodes, ...sentinel.sentinelNodes]) {
      expect(await answersPing(node.url).catch(() => false)).toBe(false);
    }
  });
});

describe("a replica of a standalone redis-server", () => {
  it("follows its primary's writes, and WAIT 1 on the writing connection counts it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "headroom-test-replica-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const primary = await startRedisServer({ dir: join(dir, "primary") });
    cleanups.push(() => primary.stop());
    const replica = await startRedisReplica(primary.url, { dir: join(dir, "replica") });
    cleanups.push(() => replica.stop());

    const writer = connect(primary.url);
    const key = `${randomUUID()}:value`;
    await writer.set(key, "replicated");
    expect(await writer.wait(1, 5_000)).toBe(1);
    expect(await connect(replica.url).get(key)).toBe("replicated");
  });
});
