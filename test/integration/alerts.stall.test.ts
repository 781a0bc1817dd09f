import { afterAll, beforeAll, expect, it } from "vitest";
import { type AlertsWorker, createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { WEBHOOK_JOB } from "../../src/alerts/queues.js";
import { createLogger } from "../../src/lib/logger.js";
import { createWorkerRedis, type RedisClient } from "../../src/redis/connections.js";
import { redisTopology } from "../../src/redis/topology.js";
import { alertsFixture } from "../helpers/alerts-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { type Receiver, startReceiver } from "../helpers/webhook-receiver.js";

// The alerts worker on a Redis connection that goes silently dead (Redis restarted behind a NAT
// that keeps the old flow open): its stall watchdog notices jobs waiting that it does not take,
// reconnects, and delivers them. And on connections made again into a dead flow, their
// handshake never answered (what a freeze landing on a connection being made leaves, e.g.
// BullMQ's blocking connection, which its own watchdog makes again): each is made once more
// (src/redis/ready-guard.ts), and what waits is delivered.

let p: Pipeline;
let fx: ReturnType<typeof alertsFixture>;
let proxy: TcpProxy;
let redis: RedisClient;
let alerts: AlertsWorker;
let receiver: Receiver;
let secret = "";

beforeAll(async () => {
  p = await startPipeline({ WORKER_LOCK_DURATION_MS: "1000", WORKER_STALLED_INTERVAL_MS: "1000" });
  fx = alertsFixture(p);
  // The test Redis may be a container on another address than the proxy's.
  const target = new URL(p.config.REDIS_URL);
  proxy = await startTcpProxy(Number(target.port), target.hostname);
  const viaProxy = new URL(p.config.REDIS_URL);
  viaProxy.hostname = "127.0.0.1";
  viaProxy.port = String(proxy.port);
  redis = createWorkerRedis(redisTopology({ ...p.config, REDIS_URL: viaProxy.toString() }));
  redis.on("error", () => {});
  alerts = createAlertsWorker({
    config: p.config,
    redis,
    clickhouse: p.client,
    logger: createLogger("silent", "test"),
  });
  receiver = await startReceiver(() => secret);
  alerts.start();
});

afterAll(async () => {
  await alerts?.close(1_000);
  redis?.disconnect();
  await proxy?.close();
  await receiver?.close();
  await fx?.close();
  await p?.close();
});

/** The ids delivered of these (each test's own), in their order. */
const deliveredOf = (...ids: string[]) =>
  receiver.deliveries.map((d) => d.id).filter((id) => ids.includes(id));

async function webhookJob(id: string) {
  const created = await fx.rules.create({
    project: `p-${id}`,
    provider: "openai",
    metric: "requests",
    warn_pct: 70,
    critical_pct: 90,
    webhook: receiver.url,
  });
  const { rule } = created;
  secret = created.secret;
  const body = JSON.stringify({ type: "headroom.alert", timestamp: "", data: { id } });
  await fx.webhooks.add(
    WEBHOOK_JOB,
    { v: 1, event_id: id, rule_id: rule.id, url: receiver.url, body },
    { jobId: id },
  );
}

it("a silently dead connection: the alerts worker reconnects and delivers what waits", async () => {
  await webhookJob("evt-before");
  await eventually(() => expect(deliveredOf("evt-before")).toEqual(["evt-before"]), {
    timeoutMs: 20_000,
  });
  // Its completion reaches Redis after the delivery: frozen before it, the job would stall and be
  // delivered again (at least once, as webhooks are), which is not what this test is about.
  await eventually(
    async () => expect(await fx.webhooks.getJobState("evt-before")).toBe("completed"),
    {
      timeoutMs: 20_000,
    },
  );

  expect(proxy.freeze()).toBeGreaterThan(0);
  await webhookJob("evt-after");
  await eventually(
    () => expect(deliveredOf("evt-before", "evt-after")).toEqual(["evt-before", "evt-after"]),
    {
      timeoutMs: 30_000,
      intervalMs: 100,
    },
  );
});

it("connections made again into a dead flow: each is made once more, and what waits is delivered", async () => {
  await webhookJob("evt-first");
  await eventually(() => expect(deliveredOf("evt-first")).toEqual(["evt-first"]), {
    timeoutMs: 20_000,
  });
  await eventually(
    async () => expect(await fx.webhooks.getJobState("evt-first")).toBe("completed"),
    {
      timeoutMs: 20_000,
    },
  );

  // Every connection of the worker closes, and each it makes again is dead from its first byte.
  proxy.freezeArrivals(true);
  try {
    expect(proxy.reset()).toBeGreaterThan(0);
    // Made again, and caught: every one of them (main, blocking, probes) is frozen in its handshake.
    await eventually(() => expect(proxy.open()).toBeGreaterThanOrEqual(4), { timeoutMs: 10_000 });
  } finally {
    proxy.freezeArrivals(false);
  }
  await webhookJob("evt-then");
  await eventually(
    () => expect(deliveredOf("evt-first", "evt-then")).toEqual(["evt-first", "evt-then"]),
    {
      timeoutMs: 30_000,
      intervalMs: 100,
    },
  );
});
