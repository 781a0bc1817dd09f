import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { describe, expect, it, onTestFinished } from "vitest";
import { quotaKeys } from "../../src/edge/quota-counter.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { clientReport, type EdgeFixture, startEdge } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { notAtMonthEnd } from "../helpers/month-end.js";

// REDIS_ACK_REPLICAS=1 with the replica down (its process killed): the primary takes each job
// but no replica confirms it. Such a report is stored — the job stays in the queue for workers —
// so it is counted against the quota, and its 503 says that it may be stored. The quota still
// holds while the replica is away: a free project with a quota of 3 gets three such 503s, then
// 429s, and exactly three reports wait in the queue.

const QUOTA = 3;

/**
 * A primary and its replica of this test's own, in sync, and an edge on the primary that waits
 * for one replica; all stopped when the test ends. Each test kills its replica when it chooses.
 */
async function replicatedEdge(): Promise<{ fx: EdgeFixture; killReplica(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "headroom-ack-down-"));
  let primary: RedisServer | undefined;
  let replica: RedisServer | undefined;
  let fx: EdgeFixture | undefined;
  onTestFinished(async () => {
    await fx?.close();
    await replica?.kill();
    await primary?.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  primary = await startRedisServer({ dir: join(dir, "primary") });
  replica = await startRedisServer({ dir: join(dir, "replica"), replicaOf: primary.url });
  const probe = new Redis(primary.url, { maxRetriesPerRequest: 1 });
  try {
    // In sync: a write of this connection confirmed by the replica.
    await eventually(
      async () => {
        await probe.set("probe", "1");
        expect(await probe.wait(1, 500)).toBe(1);
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
  } finally {
    probe.disconnect();
  }
  fx = await startEdge({
    redisUrl: primary.url,
    env: { REDIS_ACK_REPLICAS: "1", REDIS_ACK_TIMEOUT_MS: "1000" },
  });
  return {
    fx,
    async killReplica() {
      await replica?.kill();
      replica = undefined;
    },
  };
}

describe("a replica down under REDIS_ACK_REPLICAS=1", () => {
  it("a report answered 503 is stored and counted; the quota holds", async () => {
    const { fx, killReplica } = await replicatedEdge();
    const redisNow = async () => Number((await fx.edge.redis.time())[0]) * 1000;
    await notAtMonthEnd(redisNow);
    const k = await fx.createKey({
      plan: "free",
      overrides: { monthly: QUOTA, burst: 1_000, capacity: 1_000 },
    });
    // One report confirmed while the replica is up.
    const first = await fx.post(clientReport(), { key: k.key });
    expect(first.statusCode, first.body).toBe(200);

    await killReplica();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await fx.post(clientReport(), { key: k.key }));
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses).toEqual([503, 503, 429, 429, 429, 429, 429, 429, 429, 429]);
    for (const a of answers.slice(0, QUOTA - 1)) {
      expect(a.json()).toMatchObject({ error: "unavailable" });
      expect(a.json<{ message: string }>().message).toMatch(/may have been stored/);
      expect(a.headers["retry-after"]).toBeDefined();
    }
    expect(answers[2]?.json()).toMatchObject({ error: "quota_exceeded", limit: QUOTA });

    // What was answered 503 is in the queue, with the report answered 200: three in all.
    const queued = (await fx.records()).filter((r) => r.project_id === k.projectId);
    expect(queued).toHaveLength(QUOTA);
    // And Redis counts all three against the month.
    const month = new Date(await redisNow()).toISOString().slice(0, 7);
    const [counter] = quotaKeys("headroom:quota", `${k.projectId}:${month}`);
    expect(Number(await fx.edge.redis.get(counter as string))).toBe(QUOTA);
  });

  it("a batch whose job no replica confirmed: each item may be stored, and its id stays claimed", async () => {
    const { fx, killReplica } = await replicatedEdge();
    await killReplica();
    const k = await fx.createKey({
      plan: "free",
      overrides: { monthly: 10, burst: 1_000, capacity: 1_000 },
    });
    const body = [0, 1, 2].map(() => clientReport({ id: randomUUID() }));
    const res = await fx.post(body, { key: k.key, url: "/api/reports" });
    expect(res.statusCode).toBe(207);
    for (const r of res.json().results) {
      expect(r).toMatchObject({
        error: "unavailable",
        message: /may have been stored.*id is safe/,
      });
    }
    // Sent again while no replica can confirm: the reports are in the queue already, and are not
    // queued twice; nor are they answered `duplicate`, which, like a 200, needs the replica.
    const again = await fx.post(body, { key: k.key, url: "/api/reports" });
    expect(again.statusCode).toBe(207);
    for (const r of again.json().results) {
      expect(r).toMatchObject({
        error: "unavailable",
        message: /may have been stored.*id is safe/,
      });
    }
    const queued = (await fx.records()).filter((r) => r.project_id === k.projectId);
    expect(queued.map((r) => r.report_id).sort()).toEqual(body.map((r) => r.id).sort());

    // An item without an id has nothing to claim: resending it would queue it again.
    const anonymous = await fx.post([clientReport()], { key: k.key, url: "/api/reports" });
    expect(anonymous.statusCode).toBe(207);
    expect(anonymous.json().results).toEqual([
      {
        error: "unavailable",
        message: expect.stringMatching(
          /may have been stored.*may count it twice \(give it an id\)/,
        ),
      },
    ]);
  });
});
