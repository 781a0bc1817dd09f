import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { describeTopology, redisTopology } from "../../src/redis/topology.js";

describe("Redis topology from the configuration", () => {
  it("is one server by default", () => {
    const topology = redisTopology(loadConfig({ REDIS_URL: "redis://:pw@10.0.0.1:6380" }));
    expect(topology).toEqual({ kind: "standalone", url: "redis://:pw@10.0.0.1:6380" });
    expect(describeTopology(topology)).toBe("redis://:***@10.0.0.1:6380");
  });

  it("is a Cluster from seed nodes, with credentials and TLS from a URL entry", () => {
    const config = loadConfig({
      REDIS_CLUSTER_NODES: "rediss://app:s3cret@10.0.0.1:7000, 10.0.0.2:7001,[::1]:7002",
    });
    const topology = redisTopology(config);
    expect(topology).toEqual({
      kind: "cluster",
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "10.0.0.2", port: 7001 },
        { host: "::1", port: 7002 },
      ],
      auth: { tls: true, username: "app", password: "s3cret" },
    });
    expect(describeTopology(topology)).not.toContain("s3cret");
  });

  it("is a Sentinel set with the monitored primary's name", () => {
    const topology = redisTopology(
      loadConfig({
        REDIS_SENTINELS: "127.0.0.1:26379,127.0.0.1:26380",
        REDIS_SENTINEL_NAME: "headroom",
        REDIS_SENTINEL_PASSWORD: "sentinel-pw",
      }),
    );
    expect(topology).toMatchObject({
      kind: "sentinel",
      name: "headroom",
      sentinels: [
        { host: "127.0.0.1", port: 26379 },
        { host: "127.0.0.1", port: 26380 },
      ],
      auth: { tls: false },
      sentinelPassword: "sentinel-pw",
    });
    expect(describeTopology(topology)).toBe("sentinel headroom@127.0.0.1:26379,127.0.0.1:26380");
  });

  it.each([
    [{ REDIS_CLUSTER_NODES: "a:1", REDIS_SENTINELS: "b:2", REDIS_SENTINEL_NAME: "m" }, "not both"],
    [{ REDIS_SENTINELS: "b:2" }, "REDIS_SENTINEL_NAME"],
    [{ REDIS_CLUSTER_NODES: "no-port" }, "REDIS_CLUSTER_NODES"],
    [{ REDIS_CLUSTER_NODES: "a:1", QUEUE_PREFIX: "headroom" }, "hash tag"],
    [{ QUEUE_SHARDS: "3", QUEUE_PREFIX: "plain" }, "hash tag"],
    [{ QUEUE_SHARDS: "2", WORKER_SHARDS: "0,2" }, "WORKER_SHARDS"],
    [{ WORKER_SHARDS: "x" }, "WORKER_SHARDS"],
  ])("refuses %o", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it("reads a pinned worker's shards", () => {
    expect(loadConfig({ QUEUE_SHARDS: "4", WORKER_SHARDS: "0, 3" }).WORKER_SHARDS).toEqual([0, 3]);
  });
});
