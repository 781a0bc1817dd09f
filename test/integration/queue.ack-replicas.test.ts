import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { jobRows } from "../../src/queue/job-rows.js";
import { createReportsQueue } from "../../src/queue/reports-queue.js";
import { clientReport, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";

// REDIS_ACK_REPLICAS on a real primary and replica: a 200 only once the replica holds the job;
// while the replica cannot confirm (paused), 503 and never 200; back to 200 once it can.

// Long enough that a replica on a loaded machine confirms in time (300 ms did not always); the
// paused replica's 503s wait this long.
const ACK_TIMEOUT_MS = 2_000;
let dir: string;
let primary: RedisServer;
let replica: RedisServer;
let replicaClient: Redis;
let edge: Edge;
let key: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "headroom-ack-"));
  primary = await startRedisServer({ dir: join(dir, "primary") });
  replica = await startRedisServer({ dir: join(dir, "replica") });
  replicaClient = new Redis(replica.url, { maxRetriesPerRequest: 1 });
  await replicaClient.replicaof("127.0.0.1", primary.port);
  await eventually(
    async () => expect(await replicaClient.info("replication")).toMatch(/master_link_status:up/),
    { timeoutMs: 15_000, intervalMs: 100 },
  );
  const tag = uniqueId();
  edge = await createEdge(
    loadConfig({
      REDIS_URL: primary.url,
      QUEUE_PREFIX: `{t-${tag}}`,
      REDIS_ACK_REPLICAS: "1",
      REDIS_ACK_TIMEOUT_MS: String(ACK_TIMEOUT_MS),
    }),
    createLogger("silent", "test"),
  );
  ({ key } = await edge.keyStore.create(`p-ack-${tag}`, { defaultPlan: "unlimited" }));
});

afterAll(async () => {
  if (replica?.process.pid) process.kill(replica.process.pid, "SIGCONT");
  await edge?.close();
  replicaClient?.disconnect();
  await replica?.kill();
  await primary?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = () =>
  edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(clientReport()),
  });

async function queuedOn(redisUrl: string): Promise<Set<string>> {
  const client = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const queue = createReportsQueue(client, edge.queues.names[0] ?? { prefix: "", name: "" });
  try {
    const jobs = await queue.getJobs(["wait"]);
    return new Set(jobs.flatMap((j) => jobRows(j.data).map((r) => String(r[0]))));
  } finally {
    await queue.close();
    client.disconnect();
  }
}

describe("REDIS_ACK_REPLICAS=1", () => {
  it("answers 200 only for reports the replica holds", async () => {
    const answers = await Promise.all(Array.from({ length: 40 }, post));
    expect(answers.map((a) => a.statusCode)).toEqual(answers.map(() => 200));
    const onReplica = await queuedOn(replica.url);
    for (const a of answers) expect(onReplica.has(a.json<{ id: string }>().id)).toBe(true);
  });

  it("answers 503, never 200, while the replica cannot confirm; 200 again once it can", async () => {
    const pid = replica.process.pid as number;
    process.kill(pid, "SIGSTOP");
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, post));
      expect(answers.map((a) => a.statusCode)).toEqual(answers.map(() => 503));
      expect(answers[0]?.json()).toMatchObject({ error: "unavailable" });
    } finally {
      process.kill(pid, "SIGCONT");
    }
    await eventually(async () => expect((await post()).statusCode).toBe(200), {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
  });
});
