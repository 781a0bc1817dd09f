import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { monthOf } from "../../src/edge/limits.js";
import { quotaKeys, redisQuotaStore } from "../../src/edge/quota-counter.js";
import { waitForReady } from "../../src/redis/connections.js";
import { clientReport, type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { freePort } from "../helpers/free-ports.js";
import { notAtMonthEnd } from "../helpers/month-end.js";

// The monthly quota with two edges at once: two edges in process sharing one Redis, one key
// store and one queue, as two edge processes behind a load balancer do. Each test owns its
// project; what is counted is what a client sees (200s and 429s) and what reached the queue.

const QUOTA = 300;
// The burst limit is not what these tests are about.
const OVERRIDES = { monthly: QUOTA, burst: 100_000, capacity: 100_000 };

let a: EdgeFixture;
let b: EdgeFixture;

beforeAll(async () => {
  const tag = uniqueId();
  const env = { QUEUE_PREFIX: `{t-${tag}}`, QUEUE_NAME: `reports-${tag}` };
  [a, b] = await Promise.all([startEdge({ env }), startEdge({ env })]);
});

afterAll(async () => {
  await a?.close();
  await b?.close();
});

const month = () => new Date().toISOString().slice(0, 7);

/** Posts one report per entry of `on` (which edge), at most `concurrency` at a time, in order. */
async function send(key: string, on: EdgeFixture[], concurrency = 16) {
  const statuses: number[] = new Array(on.length);
  const bodies: Record<string, unknown>[] = new Array(on.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < on.length; i = next++) {
        const res = await (on[i] as EdgeFixture).post(clientReport(), { key });
        statuses[i] = res.statusCode;
        bodies[i] = res.json();
      }
    }),
  );
  return { statuses, bodies, count: (s: number) => statuses.filter((x) => x === s).length };
}

const queued = async (projectId: string) =>
  (await a.records()).filter((r) => r.project_id === projectId).length;

describe("the monthly quota across two edges", () => {
  it("reports to both edges at once, more than the quota: exactly the quota is accepted", async () => {
    await notAtMonthEnd();
    const k = await a.createKey({ plan: "free", overrides: OVERRIDES });
    // A seeded interleaving of 420 reports over the two edges.
    const [order] = fc.sample(fc.array(fc.boolean(), { minLength: 420, maxLength: 420 }), 1);
    const on = (order ?? []).map((toA) => (toA ? a : b));
    const { statuses, bodies, count } = await send(k.key, on, 24);
    expect(count(200)).toBe(QUOTA);
    expect(count(429)).toBe(420 - QUOTA);
    for (const [i, s] of statuses.entries()) {
      if (s !== 429) continue;
      expect(bodies[i]).toMatchObject({ error: "quota_exceeded", limit: QUOTA, remaining: 0 });
      expect(bodies[i]?.used).toBe(QUOTA);
    }
    // Both edges took part in accepting.
    expect(statuses.filter((s, i) => s === 200 && on[i] === a).length).toBeGreaterThan(0);
    expect(statuses.filter((s, i) => s === 200 && on[i] === b).length).toBeGreaterThan(0);
    expect(await queued(k.projectId)).toBe(QUOTA);
    // And once every lease has ended, Redis counts exactly what was accepted.
    const [counter] = quotaKeys("headroom:quota", `${k.projectId}:${month()}`);
    await eventually(async () => expect(await a.edge.redis.get(counter)).toBe(String(QUOTA)));
  });

  it("exactly the quota, most to one edge while the other went quiet holding units: all accepted", async () => {
    await notAtMonthEnd();
    const k = await a.createKey({ plan: "free", overrides: OVERRIDES });
    const [counter, holders] = quotaKeys("headroom:quota", `${k.projectId}:${month()}`);
    // B takes its first few in two waves, reserves more than it uses, and goes quiet.
    const first = await send(k.key, Array(5).fill(b), 5);
    const second = await send(k.key, Array(10).fill(b), 10);
    expect(first.count(200) + second.count(200)).toBe(15);
    // What the test is about: B now holds units it has not used.
    const held = await a.edge.redis.hgetall(holders);
    expect(Object.keys(held)).toHaveLength(1);
    expect(Number(await a.edge.redis.get(counter))).toBeGreaterThan(15);
    // A takes all the rest at once: the last of them need B's units.
    const rest = await send(k.key, Array(QUOTA - 15).fill(a), 16);
    expect(rest.count(200)).toBe(QUOTA - 15);
    // The quota is used up exactly: the next report is refused on either edge.
    for (const edge of [a, b]) {
      const res = await edge.post(clientReport(), { key: k.key });
      expect(res.statusCode, res.body).toBe(429);
      expect(res.json()).toMatchObject({ error: "quota_exceeded", used: QUOTA });
    }
    expect(await queued(k.projectId)).toBe(QUOTA);
  });

  it("a report that fails to enqueue gives its unit back, to any edge", async () => {
    await notAtMonthEnd();
    const k = await a.createKey({ plan: "free", overrides: { ...OVERRIDES, monthly: 5 } });
    // BullMQ numbers jobs with INCR on this key: a value that is not a number makes every add
    // fail in Redis, a real failure of the enqueue after the quota was taken.
    const idKey = `${a.config.QUEUE_PREFIX}:${a.config.QUEUE_NAME}:id`;
    const id = await a.edge.redis.get(idKey);
    await a.edge.redis.set(idKey, "not-a-number");
    try {
      const failed = await a.post(clientReport(), { key: k.key });
      expect(failed.statusCode, failed.body).toBe(503);
    } finally {
      if (id === null) await a.edge.redis.del(idKey);
      else await a.edge.redis.set(idKey, id);
    }
    // All five on the other edge: the unit is back in Redis, not only on A.
    const ok = await send(k.key, Array(5).fill(b), 1);
    expect(ok.count(200)).toBe(5);
    const over = await b.post(clientReport(), { key: k.key });
    expect(over.statusCode, over.body).toBe(429);
    expect(await queued(k.projectId)).toBe(5);
  });

  it("an edge that shuts down gives back the units it holds unused", async () => {
    await notAtMonthEnd();
    // A third edge on the same Redis (a queue of its own: closing it clears that queue).
    const c = await startEdge();
    try {
      const k = await c.createKey({ plan: "free", overrides: OVERRIDES });
      const [counter, holders] = quotaKeys("headroom:quota", `${k.projectId}:${month()}`);
      await send(k.key, Array(5).fill(c), 5);
      await send(k.key, Array(10).fill(c), 10);
      expect(Number(await a.edge.redis.get(counter))).toBeGreaterThan(15);
      await c.close();
      expect(await a.edge.redis.get(counter)).toBe("15");
      expect(await a.edge.redis.hlen(holders)).toBe(0);
    } finally {
      await c.close();
    }
  });

  it("a month counted before the upgrade keeps counting (rate-limiter-flexible's counter)", async () => {
    await notAtMonthEnd();
    const k = await a.createKey({ plan: "free", overrides: OVERRIDES });
    const now = new Date();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    // What the previous release did for each report: consume one point of this limiter.
    const old = new RateLimiterRedis({
      storeClient: a.edge.redis,
      keyPrefix: "headroom:quota",
      points: QUOTA,
      duration: 1,
    });
    await old.consume(`${k.projectId}:${month()}`, QUOTA - 4, {
      customDuration: Math.ceil((nextMonth - now.getTime()) / 1000),
    });
    const { count } = await send(k.key, [a, b, a, b, a, b, a, b], 4);
    expect(count(200)).toBe(4);
    expect(count(429)).toBe(4);
    expect(await queued(k.projectId)).toBe(4);
  });
});

describe("on a Redis Cluster node", () => {
  let dir: string;
  let redis: Redis;
  let stop: () => void;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "headroom-quota-cluster-"));
    const port = await freePort();
    const child = spawn(
      "redis-server",
      [
        ...["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", ""],
        ...["--appendonly", "no", "--cluster-enabled", "yes"],
      ],
      { stdio: "ignore" },
    );
    stop = () => child.kill("SIGKILL");
    redis = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    redis.on("error", () => {});
    await waitForReady(redis);
    // One node that serves every slot: multi-key commands across slots still fail (CROSSSLOT).
    await redis.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
    await eventually(async () => {
      expect(await redis.call("CLUSTER", "INFO")).toMatch(/cluster_state:ok/);
    });
  });

  afterEach(async () => {
    await redis.flushall();
  });

  afterAll(async () => {
    redis?.disconnect();
    stop?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the script's two keys share a slot, with or without a hash tag in the prefix", async () => {
    // The check is real: two keys of different slots in one script are refused.
    await expect(redis.eval("return 1", 2, "a", "b")).rejects.toThrow(/CROSSSLOT/);
    // The month Redis's clock is in: the script reserves units of no other.
    const [sec] = await redis.time();
    const key = `prj:${monthOf(Number(sec) * 1000)}`;
    for (const prefix of ["headroom:quota", "{headroom}:quota"]) {
      const store = redisQuotaStore(redis, prefix);
      const call = {
        monthly: 10,
        want: 6,
        serve: 1,
        giveBack: 0,
        keep: 0,
        spread: 1,
        leaseMs: 1_000,
        graceMs: 2_000,
      };
      expect(await store(key, "e1", call)).toMatchObject({ granted: 6, used: 6 });
      expect(await store(key, "e2", { ...call, want: 10, serve: 10 })).toMatchObject({
        granted: 4,
        used: 10,
        othersHeld: 5,
      });
    }
  });
});
