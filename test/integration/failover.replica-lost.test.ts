import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { createIngestWorker, type IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";
import { info, withRedis } from "../helpers/redis-topology/redis-probe.js";
import { startRedisReplica } from "../helpers/redis-topology/redis-replica.js";

// With REDIS_ACK_REPLICAS=1, a primary left without a replica (its replica died, or was promoted
// in place of a dead primary, and none is back): the workers keep its batches from ClickHouse
// until a replica is back, since a batch inserted from an unreplicated manifest would be counted
// twice if this primary failed too. They say so: a gauge and an error log on the workers, a
// warning and the `replicas` check of /readyz on the edge. Once a replica is back, every held
// report lands, once.

const TOKEN = "replica-lost-metrics-token-01";
let dir: string;
let primary: RedisServer;
let replica: RedisServer | undefined;
let p: Pipeline;
let worker: IngestWorker | undefined;
let edge: EdgeFixture | undefined;
const metrics = createWorkerMetrics();
const workerLines: string[] = [];
const edgeLines: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "headroom-replica-lost-"));
  primary = await startRedisServer({ dir: join(dir, "primary"), appendonly: false });
  replica = await startRedisReplica(primary.url, { dir: join(dir, "replica"), appendonly: false });
  p = await startPipeline({
    REDIS_URL: primary.url,
    REDIS_ACK_REPLICAS: "1",
    REDIS_ACK_TIMEOUT_MS: "100",
    RETRY_MAX_DELAY_MS: "200",
  });
  worker = createIngestWorker({
    config: p.config,
    redis: p.redis,
    clickhouse: p.client,
    logger: createLogger("info", "test", { write: (l: string) => workerLines.push(l) }),
    metrics,
  });
  worker.start();
}, 120_000);

afterAll(async () => {
  await edge?.close();
  await worker?.close();
  await p?.close();
  await replica?.kill();
  await primary?.kill();
  rmSync(dir, { recursive: true, force: true });
});

const held = async () => (await metrics.awaitingReplicas.get()).values[0]?.value ?? 0;
const replicas = () =>
  withRedis(primary.url, async (r) =>
    Number((await info(r, "replication")).get("connected_slaves")),
  );

it("holds a replica-less primary's batches, says so, and lands them once a replica is back", {
  timeout: 120_000,
}, async () => {
  // With its replica, reports land.
  const before = `p-${uniqueId()}`;
  await p.fill(2, 5, before);
  await eventually(async () => expect(await p.distinctCount(before)).toBe(10), {
    timeoutMs: 20_000,
  });

  await replica?.kill();
  replica = undefined;
  await eventually(async () => expect(await replicas()).toBe(0), { timeoutMs: 20_000 });
  edge = await startEdge({
    redisUrl: primary.url,
    env: { REDIS_ACK_REPLICAS: "1", METRICS_TOKEN: TOKEN, BACKLOG_CHECK_INTERVAL_MS: "50" },
    logger: createLogger("warn", "test", { write: (l: string) => edgeLines.push(l) }),
  });

  // Jobs acknowledged while the replica was there, still in the queue.
  const during = `p-${uniqueId()}`;
  await p.fill(3, 5, during);
  await eventually(async () => expect(await held()).toBeGreaterThan(0), { timeoutMs: 20_000 });
  await eventually(
    () =>
      expect(workerLines.join("")).toMatch(
        /batch held from ClickHouse: its manifest is on fewer replicas than REDIS_ACK_REPLICAS/,
      ),
    { timeoutMs: 20_000 },
  );
  expect(edgeLines.join("")).toMatch(/fewer than REDIS_ACK_REPLICAS=1 replicas/);
  const ready = await edge.edge.app.inject({
    method: "GET",
    url: "/readyz",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  // Intake goes on (other shards take reports); the held batches are told, not hidden.
  expect(ready.statusCode).toBe(200);
  expect(ready.json()).toMatchObject({
    status: "degraded",
    checks: { replicas: { ok: false, short: [expect.stringMatching(`:${primary.port}$`)] } },
  });
  const scrape = await edge.edge.app.inject({
    method: "GET",
    url: "/metrics",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  expect(scrape.body).toMatch(/^headroom_redis_primaries_short_of_replicas 1$/m);
  expect(await p.distinctCount(during)).toBe(0);

  // A replica again: the held batches go in, each report once.
  replica = await startRedisReplica(primary.url, {
    dir: join(dir, "replica-2"),
    appendonly: false,
  });
  await eventually(async () => expect(await p.distinctCount(during)).toBe(15), {
    timeoutMs: 30_000,
  });
  await eventually(async () => expect(await held()).toBe(0));
  expect(await p.rawCount(during)).toBe(15);
  expect(await p.rollupCount(during)).toBe(15);
  await eventually(async () => {
    const again = await edge?.edge.app.inject({
      method: "GET",
      url: "/readyz",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(again?.json()).toMatchObject({ status: "ok", checks: { replicas: { ok: true } } });
  });
});
