import { afterAll, beforeAll, expect, inject, it, vi } from "vitest";
import { createProducerRedis, type RedisClient } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import { eventually } from "../helpers/eventually.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";

// The edge's client on a connection that went silently dead (Redis restarted behind a NAT that
// keeps the old flow open): its first command unanswered within the command timeout drops the
// connection, and the client makes a new one by itself. Nothing else has to notice (the edge's
// periodic check did, a poll later; requests waited a whole timeout each until then).

let proxy: TcpProxy;
let redis: RedisClient;

beforeAll(async () => {
  // The test Redis may be a container on another address than the proxy's.
  const target = new URL(inject("redisUrl"));
  proxy = await startTcpProxy(Number(target.port), target.hostname);
  const viaProxy = new URL(target);
  viaProxy.hostname = "127.0.0.1";
  viaProxy.port = String(proxy.port);
  redis = createProducerRedis(redisTopology({ REDIS_URL: viaProxy.toString() }));
  redis.on("error", () => {});
  await eventually(async () => expect(await redis.ping()).toBe("PONG"), { timeoutMs: 10_000 });
});

afterAll(async () => {
  redis?.disconnect();
  await proxy?.close();
});

it("a command unanswered within the timeout drops its dead connection; the next one is answered", {
  timeout: 60_000,
}, async () => {
  let connects = 0;
  redis.on("connect", () => connects++);
  expect(proxy.freeze()).toBe(1);
  // The drop trusts the command's timer, not a clock read again: Node's timers count the event
  // loop's whole milliseconds, and one fires up to 1 ms short of its delay as performance.now()
  // counts it (7 of 300 timers of 20 ms on the CI machine), so a drop that timed the command
  // again missed about one timeout in 40. Here that clock stands still while the command waits.
  const clock = vi.spyOn(performance, "now").mockReturnValue(performance.now());
  try {
    await expect(redis.ping()).rejects.toThrow("Command timed out");
  } finally {
    clock.mockRestore();
  }
  // A new connection, made without any other command or check asking for it.
  await eventually(
    async () => {
      expect(connects).toBe(1);
      expect(await redis.ping()).toBe("PONG");
    },
    { timeoutMs: 10_000, intervalMs: 50 },
  );
});
