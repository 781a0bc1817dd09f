import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { createReportsQueue } from "../../src/queue/reports-queue.js";
import { shardNames } from "../../src/queue/shards.js";
import { createWorkerMetrics } from "../../src/worker/metrics.js";
import { createShardedIngest, type ShardedIngest } from "../../src/worker/sharded-ingest.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startPipeline } from "../helpers/pipeline.js";

// Sharded queues on a real Redis and the real ClickHouse engine: edges spread jobs over the
// shards, workers drain every shard any edge wrote to (also after QUEUE_SHARDS changed), a pinned
// worker only its own, and every report lands once.

const logger = createLogger("silent", "test");
let p: Pipeline;
const edges: Edge[] = [];
const workers: ShardedIngest[] = [];

beforeEach(async () => {
  p = await startPipeline();
});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
  for (const e of edges.splice(0)) await e.close();
  const base = { prefix: p.config.QUEUE_PREFIX, name: p.config.QUEUE_NAME };
  for (const n of [2, 3].flatMap((shards) => shardNames(base, shards))) {
    const q = createReportsQueue(p.redis, n);
    await q.obliterate({ force: true }).catch(() => {});
    await q.close();
  }
  await p.redis.del(`${base.prefix}:${base.name}:shards`);
  await p.close();
});

async function edgeWith(shards: number) {
  const edge = await createEdge({ ...p.config, QUEUE_SHARDS: shards }, logger);
  edges.push(edge);
  return edge;
}

function workerWith(env: { QUEUE_SHARDS: number; WORKER_SHARDS?: number[] }) {
  const worker = createShardedIngest({
    config: { ...p.config, ...env },
    redis: p.redis,
    clickhouse: p.client,
    logger,
    metrics: createWorkerMetrics(),
    refreshMs: 200,
  });
  workers.push(worker);
  worker.start();
  return worker;
}

/** Sends `n` reports, `concurrency` at a time; every answer must be a 200. */
async function send(edge: Edge, key: string, n: number, concurrency = 30) {
  for (let i = 0; i < n; i += concurrency) {
    const answers = await Promise.all(
      Array.from({ length: Math.min(concurrency, n - i) }, () =>
        edge.app.inject({
          method: "POST",
          url: "/api/report",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          payload: JSON.stringify(clientReport()),
        }),
      ),
    );
    expect(answers.map((a) => a.statusCode)).toEqual(answers.map(() => 200));
  }
}

const waitingPerShard = (edge: Edge) =>
  Promise.all(edge.queues.queues.map((q) => q.getJobCounts("wait").then((c) => c.wait ?? 0)));

describe("sharded queues", () => {
  it("spread jobs over the shards; workers drain every shard, also after QUEUE_SHARDS changed", async () => {
    const project = `p-shards-${uniqueId()}`;
    const three = await edgeWith(3);
    const { key } = await three.keyStore.create(project, { defaultPlan: "unlimited" });
    await send(three, key, 300);
    const perShard = await waitingPerShard(three);
    expect(perShard.filter((jobs) => jobs > 0).length).toBe(3);
    // The backlog gate sees all of them.
    expect(Object.values(await three.queues.getJobCounts("wait")).reduce((a, b) => a + b)).toBe(
      perShard.reduce((a, b) => a + b),
    );

    // The deployment moves to 2 shards; its workers know only the new number.
    const two = await edgeWith(2);
    await send(two, key, 100);
    const worker = workerWith({ QUEUE_SHARDS: 2 });
    await eventually(
      async () => {
        expect(
          await p.scalar(`SELECT count() FROM ${p.db}.reports WHERE project_id = '${project}'`),
        ).toBe(400);
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(
      await p.scalar(
        `SELECT uniqExact(report_id) FROM ${p.db}.reports WHERE project_id = '${project}'`,
      ),
    ).toBe(400);
    expect(worker.shards().sort()).toEqual(
      [...new Set([...three.queues.names, ...two.queues.names].map((n) => n.prefix))].sort(),
    );
    expect(await waitingPerShard(three)).toEqual([0, 0, 0]);
  });

  it("a pinned worker consumes its shards only", async () => {
    const project = `p-pinned-${uniqueId()}`;
    const edge = await edgeWith(2);
    const { key } = await edge.keyStore.create(project, { defaultPlan: "unlimited" });
    await send(edge, key, 120);
    const before = await waitingPerShard(edge);
    expect(before.every((jobs) => jobs > 0)).toBe(true);
    const pinned = workerWith({ QUEUE_SHARDS: 2, WORKER_SHARDS: [1] });
    expect(pinned.shards()).toEqual([edge.queues.names[1]?.prefix]);
    await eventually(async () => expect((await waitingPerShard(edge))[1]).toBe(0), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    // Shard 0 is another worker's: untouched.
    expect((await waitingPerShard(edge))[0]).toBe(before[0]);
  });
});
