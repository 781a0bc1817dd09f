import type { Server } from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/lib/logger.js";
import { serveMetrics } from "../../src/lib/metrics-server.js";
import { workerHealth } from "../../src/queue/worker-health.js";
import { createIngestWorker, type IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";

// A stalled pipeline must not look healthy: with ClickHouse stopped while jobs wait, the worker's
// /healthz fails with its reason, the seconds since the last insert and the lag keep growing, and
// all of it comes back once ClickHouse does.

const STALL_MS = 1_000;
let p: Pipeline;
let ingest: IngestWorker;
let server: Server;
let base = "";

beforeAll(async () => {
  p = await startPipeline({ WORKER_HEALTH_STALL_MS: String(STALL_MS), RETRY_MAX_DELAY_MS: "500" });
  const metrics = createWorkerMetrics();
  ingest = createIngestWorker({
    config: p.config,
    redis: p.redis,
    clickhouse: p.client,
    logger: createLogger("silent", "test"),
    metrics,
  });
  const served = await serveMetrics(metrics.registry, "127.0.0.1", 0, () =>
    workerHealth(metrics.watched, p.config.WORKER_HEALTH_STALL_MS),
  );
  server = served.server;
  base = `http://127.0.0.1:${served.port}`;
  ingest.start();
});

afterAll(async () => {
  await ingest?.close(2_000);
  server?.close();
  await p?.close();
});

async function health() {
  const res = await fetch(`${base}/healthz`);
  return { status: res.status, body: (await res.json()) as { status: string; reason?: string } };
}

async function gauge(name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return Number(line?.split(" ").at(-1));
}

it("ClickHouse down while jobs wait: health fails with its reason, lag grows; both recover", {
  timeout: 90_000,
}, async () => {
  await p.fill(1, 5, "p-health");
  await eventually(async () => expect(await p.rawCount("p-health")).toBe(5), { timeoutMs: 20_000 });
  expect(await health()).toEqual({ status: 200, body: { status: "ok" } });
  const nodeMetrics = await (await fetch(`${base}/metrics`)).text();
  expect(nodeMetrics).toMatch(/^nodejs_eventloop_lag_seconds /m);
  expect(nodeMetrics).toMatch(/^nodejs_heap_size_used_bytes /m);

  await p.stopClickHouse();
  await p.fill(2, 5, "p-health");
  const stuck = await eventually(
    async () => {
      const h = await health();
      expect(h.status).toBe(503);
      return h.body;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  expect(stuck.status).toBe("stuck");
  expect(stuck.reason).toMatch(/jobs held and none finished/);
  // Not frozen at the last insert's small lag: both keep growing while nothing is stored.
  await eventually(
    async () => {
      expect(await gauge("headroom_worker_seconds_since_last_insert")).toBeGreaterThan(2);
      expect(await gauge("headroom_worker_queue_lag_seconds")).toBeGreaterThan(2);
      expect(await gauge("headroom_worker_stuck_seconds")).toBeGreaterThan(1);
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );

  await p.startClickHouse();
  await eventually(async () => expect(await p.rawCount("p-health")).toBe(15), {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  await eventually(async () => expect((await health()).status).toBe(200), { timeoutMs: 10_000 });
  expect(await gauge("headroom_worker_seconds_since_last_insert")).toBeLessThan(30);
});
