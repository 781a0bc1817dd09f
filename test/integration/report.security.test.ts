import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import { generateKey, hashKey } from "../../src/keys/key-format.js";
import { createKeyStore } from "../../src/keys/key-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { clientReport, type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type OwnRedis, startOwnRedis } from "../helpers/own-redis.js";
import { redisText } from "../helpers/redis-text.js";

// Keys: revocation takes effect quickly on a running edge, no key or Authorization header value
// ever reaches the logs, and Redis holds only hashes of keys.

const redisUrl = inject("redisUrl");
const fixtures: EdgeFixture[] = [];
const clients: Redis[] = [];
const ownRedis: OwnRedis[] = [];

async function edge(...args: Parameters<typeof startEdge>) {
  const fx = await startEdge(...args);
  fixtures.push(fx);
  return fx;
}

function redisClient(url = redisUrl): Redis {
  const r = new Redis(url);
  clients.push(r);
  return r;
}

afterEach(async () => {
  await Promise.all(fixtures.splice(0).map((f) => f.close()));
});

afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.quit()));
  await Promise.all(ownRedis.splice(0).map((r) => r.stop()));
});

describe("revocation", () => {
  it("a revoked key stops working within the key cache's TTL on a running edge", async () => {
    const fx = await edge();
    expect(fx.config.KEY_CACHE_TTL_MS).toBe(500);
    const k = await fx.createKey();
    // Warm the edge's key cache.
    for (let i = 0; i < 3; i++) {
      expect((await fx.post(clientReport(), { key: k.key })).statusCode).toBe(200);
    }

    // Revoked through another client, as the CLI on another machine would.
    const admin = createKeyStore(redisClient());
    const revokedAt = Date.now();
    expect(await admin.revoke(k.keyId)).toBe(true);

    // Bound by the cache: an entry filled before the revocation expires KEY_CACHE_TTL_MS after
    // it, so no request that starts later than that may still be served. (How long each request
    // takes on a busy machine does not matter; when it started does.)
    const ttl = fx.config.KEY_CACHE_TTL_MS;
    const attempts: { startedAt: number; status: number }[] = [];
    await eventually(
      async () => {
        const startedAt = Date.now();
        const res = await fx.post(clientReport(), { key: k.key });
        attempts.push({ startedAt, status: res.statusCode });
        expect(res.statusCode).toBe(401);
        expect(res.json()).toMatchObject({ error: "invalid_project_key" });
      },
      { timeoutMs: 10 * ttl, intervalMs: 20 },
    );
    expect(attempts.filter((a) => a.status !== 200 && a.status !== 401)).toStrictEqual([]);
    expect(attempts.filter((a) => a.status === 200 && a.startedAt > revokedAt + ttl)).toStrictEqual(
      [],
    );
    // And it stays refused.
    for (let i = 0; i < 5; i++) {
      expect((await fx.post(clientReport(), { key: k.key })).statusCode).toBe(401);
    }
  });
});

describe("logs", () => {
  it("never contain a key or an Authorization header value", async () => {
    const lines: string[] = [];
    const logger = createLogger("trace", "edge", { write: (line: string) => lines.push(line) });
    const fx = await edge({
      logger,
      env: {
        LOG_REQUESTS: "true",
        LOG_LEVEL: "trace",
        BACKLOG_MAX_JOBS: "3",
        BACKLOG_CHECK_INTERVAL_MS: "10",
      },
    });
    const good = await fx.createKey();
    const imported = `dlm_${uniqueId()}${uniqueId()}ImportedKeyBody`;
    await fx.edge.keyStore.import(`t-imp-${uniqueId()}`, imported, { defaultPlan: "unlimited" });
    const unknown = generateKey();
    const malformed = `junk-${uniqueId()}-key!`;
    const secrets = [good.key, imported, unknown, malformed];

    const send = (authorization: string, body: unknown = clientReport()) =>
      fx.post(body, { headers: { authorization } });
    expect((await send(`Bearer ${good.key}`)).statusCode).toBe(200);
    expect((await send(`bearer   ${imported}  `)).statusCode).toBe(200);
    expect((await send(`Bearer ${unknown}`)).statusCode).toBe(401);
    expect((await send(`Bearer ${malformed}`)).statusCode).toBe(401);
    expect((await send(`Basic ${good.key}`)).statusCode).toBe(401);
    expect((await send(`Bearer ${good.key}`, `{"broken": "${good.key}`)).statusCode).toBe(400);

    // A server-side error (5xx) is logged at error level: fill the backlog past its bound.
    for (let i = 0; i < 4; i++) await fx.edge.queue.add("reports", { v: 1, rows: [] });
    await eventually(async () => {
      expect((await send(`Bearer ${good.key}`)).statusCode).toBe(503);
    });

    const log = lines.join("");
    const entries = lines.map((l) => JSON.parse(l) as { level: number; msg?: string });
    // The capture works and saw every request and the error.
    expect(entries.filter((e) => e.msg === "incoming request").length).toBeGreaterThanOrEqual(7);
    expect(entries.some((e) => e.level >= 50)).toBe(true);
    for (const secret of secrets) expect(log).not.toContain(secret);
    expect(log).not.toMatch(/bearer\s/i);
    expect(log).not.toMatch(/basic\s/i);
  });
});

describe("storage", () => {
  it("Redis holds only hashes of keys, and imported keys work unchanged", async () => {
    // Redis of this test's own: the search below reads every key there is.
    const own = await startOwnRedis();
    ownRedis.push(own);
    const fx = await edge({ redisUrl: own.url });
    const issued = await fx.createKey();
    const imported = `dlm_${uniqueId()}_${uniqueId()}-Base64urlBody`;
    const projectId = `t-imp-${uniqueId()}`;
    await fx.edge.keyStore.import(projectId, imported, { defaultPlan: "unlimited" });
    expect((await fx.post(clientReport(), { key: issued.key })).statusCode).toBe(200);
    const res = await fx.post(clientReport(), { key: imported });
    expect(res.statusCode).toBe(200);
    expect((await fx.records()).find((r) => r.report_id === res.json().id)?.project_id).toBe(
      projectId,
    );

    const redis = redisClient(own.url);
    // The hashes are there: the search below reads where the keys would be.
    expect(await redis.exists(`headroom:key:${hashKey(issued.key)}`)).toBe(1);
    expect(await redis.exists(`headroom:key:${hashKey(imported)}`)).toBe(1);

    const text = await redisText(redis);
    expect(text).toContain(hashKey(issued.key));
    expect(text).toContain(issued.keyId);
    expect(text).not.toContain(issued.key);
    expect(text).not.toContain(imported);
  });
});
