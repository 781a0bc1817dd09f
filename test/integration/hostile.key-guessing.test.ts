import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@clickhouse/client";
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../../src/api/create-api.js";
import { loadConfig } from "../../src/config.js";
import { generateKey, isWellFormedKey } from "../../src/keys/key-format.js";
import { createLogger } from "../../src/lib/logger.js";
import { createAuthFailureLimits, SHARED_TIMEOUT_MS } from "../../src/limits/auth-failures.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import {
  clientReport,
  type EdgeFixture,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { startTcpProxy } from "../helpers/tcp-proxy.js";

// Key guessing from one client IP: malformed keys are refused without a Redis call (counted by
// Redis itself, INFO commandstats, on a redis-server of this file's own), and after
// AUTH_FAILURES_PER_IP failures that IP gets 429s — also without a Redis call — while other
// IPs are served as before. Guesses spread over several edges and the read API of one
// deployment are counted together in Redis, and a Redis that is away or silently dead makes that
// count fall back to each process's own, without holding up an answer.

const FAILURES = 30;

let dir: string;
let server: RedisServer;
let admin: Redis;
let fx: EdgeFixture;
let k: TestKey;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "headroom-keys-"));
  server = await startRedisServer({ dir });
  admin = new Redis(server.url);
  fx = await startEdge({
    redisUrl: server.url,
    // No background polling: every Redis command during a test comes from its requests.
    env: { BACKLOG_CHECK_INTERVAL_MS: "3600000", AUTH_FAILURES_PER_IP: String(FAILURES) },
  });
  k = await fx.createKey();
});

afterAll(async () => {
  await fx?.close();
  await admin?.quit();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Commands Redis has run so far, all kinds, except our own INFO calls. */
async function redisCalls(): Promise<number> {
  const text = await admin.info("commandstats");
  let total = 0;
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== "info") total += Number(m[2]);
  }
  return total;
}

const KEY_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** Issued keys (right checksum), fixed so that a seed replays the same guesses. */
const ISSUED = [
  "hr_2k1Cg1jZwooVlxNohISGG5MIGeB2f8HVn",
  "hr_qHuZ44DSNtuugKdz8YyWW04WSgX3EhKnS",
  "hr_WJH4W2HQCASFy4ilRLSjnqqx2eN1kkdxR",
];
/**
 * Text a real client can put in a header value after `Bearer `: visible ASCII, space, tab and
 * Latin-1 (obs-text). No line breaks or other controls — those make no header at all — and
 * nothing blank, which is a *missing* key, not a malformed one.
 */
const headerChar = fc
  .oneof(
    fc.integer({ min: 0x20, max: 0x7e }),
    fc.integer({ min: 0xa0, max: 0xff }),
    fc.constant(0x09),
  )
  .map((c) => String.fromCharCode(c));
/** Keys that cannot exist, by construction: each breaks the format in its own way. */
const malformedKeys = fc.oneof(
  // An issued key with one character changed: the checksum no longer matches.
  fc
    .tuple(
      fc.constantFrom(...ISSUED),
      fc.integer({ min: 3, max: 35 }),
      fc.constantFrom(...KEY_CHARS),
    )
    .map(([key, i, c]) => {
      const changed = key.slice(0, i) + c + key.slice(i + 1);
      return changed === key ? `${key}x` : changed;
    }),
  // Too short for an imported key.
  fc.string({ unit: headerChar, maxLength: 11 }).map((s) => `dlm_${s}`),
  // Long enough, but with a character no key has.
  fc.string({ unit: headerChar, minLength: 16, maxLength: 40 }).map((s) => `${s}!`),
  fc.string({ unit: headerChar, minLength: 1, maxLength: 30 }).map((s) => `é${s}`),
  fc.constant("x".repeat(257)),
  fc.constant(`hr_${"A".repeat(40)}`),
);
const ip = (n: number) => `203.0.113.${n}`;

async function send(key: string, remoteAddress: string) {
  return fx.post(clientReport(), { headers: { authorization: `Bearer ${key}` }, remoteAddress });
}

describe("key guessing", () => {
  it("malformed keys cost no Redis call, and their IP is limited after the allowed failures", async () => {
    const keys = fc.sample(malformedKeys, 200);
    // The generator's promise, checked: each is a malformed key, not a missing one.
    for (const key of keys) {
      expect(isWellFormedKey(key.trim()), key).toBe(false);
      expect(key.trim(), JSON.stringify(key)).not.toBe("");
    }
    const before = await redisCalls();
    const statuses: number[] = [];
    for (const key of keys) {
      const res = await send(key, ip(1));
      statuses.push(res.statusCode);
      if (res.statusCode === 401)
        expect(res.json()).toMatchObject({ error: "invalid_project_key" });
    }
    expect(await redisCalls()).toBe(before);
    expect(statuses.slice(0, FAILURES)).toStrictEqual(Array(FAILURES).fill(401));
    expect(statuses.slice(FAILURES)).toStrictEqual(Array(keys.length - FAILURES).fill(429));

    // Limited: even the right key, from that IP, for the rest of the window.
    const limited = await send(k.key, ip(1));
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: "rate_limited", limit: FAILURES, remaining: 0 });
    expect(Number(limited.headers["retry-after"])).toBeGreaterThan(0);
    expect(limited.headers["ratelimit-limit"]).toBe(String(FAILURES));
    expect(await redisCalls()).toBe(before);

    // Everybody else is served as before.
    expect((await send(k.key, ip(2))).statusCode).toBe(200);
    expect((await send(keys[0] as string, ip(3))).statusCode).toBe(401);
  });

  it("well-formed guesses cost one look-up each until the IP is limited, then none", async () => {
    // The control: a well-formed key is looked up, and commandstats sees it.
    let before = await redisCalls();
    expect((await send(generateKey(), ip(10))).statusCode).toBe(401);
    expect(await redisCalls()).toBeGreaterThan(before);

    const statuses: number[] = [];
    for (let i = 1; i < FAILURES; i++)
      statuses.push((await send(generateKey(), ip(10))).statusCode);
    expect(statuses).toStrictEqual(Array(FAILURES - 1).fill(401));
    before = await redisCalls();
    for (let i = 0; i < 100; i++) {
      expect((await send(generateKey(), ip(10))).statusCode).toBe(429);
    }
    expect(await redisCalls()).toBe(before);
    expect((await send(k.key, ip(11))).statusCode).toBe(200);
  });

  it("guesses spread over two edges and the read API get the limit once, not once per process", async () => {
    // A second edge and a read API of the same deployment (queue prefix) on the same Redis, as a
    // deployment behind a balancer runs them.
    const deployment = {
      QUEUE_PREFIX: fx.config.QUEUE_PREFIX,
      AUTH_FAILURES_PER_IP: String(FAILURES),
    };
    const other = await startEdge({
      redisUrl: server.url,
      env: { BACKLOG_CHECK_INTERVAL_MS: "3600000", ...deployment },
    });
    const api = await createApi(
      loadConfig({ REDIS_URL: server.url, ...deployment }),
      createLogger("silent", "test"),
      // Never queried: every request here is refused before it reaches ClickHouse.
      { clickhouse: createClient({ url: "http://127.0.0.1:9" }) },
    );
    try {
      const from = ip(20);
      const attempts = [
        () => send(generateKey(), from),
        () =>
          other.post(clientReport(), {
            headers: { authorization: `Bearer ${generateKey()}` },
            remoteAddress: from,
          }),
        () =>
          api.app.inject({
            url: "/api/v1/headroom",
            headers: { authorization: `Bearer ${generateKey("read")}` },
            remoteAddress: from,
          }),
      ];
      const statuses: number[] = [];
      for (let i = 0; i < 3 * FAILURES; i++) {
        const attempt = attempts[i % attempts.length] as () => Promise<{ statusCode: number }>;
        statuses.push((await attempt()).statusCode);
      }
      // Each process alone would allow FAILURES; the three together allow FAILURES in all.
      expect(statuses.slice(0, FAILURES)).toStrictEqual(Array(FAILURES).fill(401));
      expect(statuses.slice(FAILURES)).toStrictEqual(Array(2 * FAILURES).fill(429));
      // Another client of the same processes is served as before.
      expect((await send(k.key, ip(21))).statusCode).toBe(200);
      expect(
        (await other.post(clientReport(), { key: k.key, remoteAddress: ip(21) })).statusCode,
      ).toBe(200);
    } finally {
      await api.close();
      await other.close();
    }
  });

  it("one client's many good keys looked up at once on two cold edges are served or sent again at once, and the client is not refused after", async () => {
    const other = await startEdge({
      redisUrl: server.url,
      env: {
        BACKLOG_CHECK_INTERVAL_MS: "3600000",
        QUEUE_PREFIX: fx.config.QUEUE_PREFIX,
        AUTH_FAILURES_PER_IP: String(FAILURES),
      },
    });
    try {
      // Fewer than the limit per edge (each edge's own count holds its look-ups in flight), more
      // than it across the two: the deployment's count holds 2 x PER_EDGE at once.
      const PER_EDGE = FAILURES - 5;
      const keys = await Promise.all(
        Array.from({ length: 2 * PER_EDGE + 1 }, () => fx.createKey()),
      );
      const from = ip(40);
      // Writes held for a moment: every edge's count is taken before any look-up gives it back,
      // as on a loaded machine (the bench's cold start of 20 keys on 2 edges met this).
      await admin.call("CLIENT", "PAUSE", "300", "WRITE");
      const sendAll = () =>
        Promise.all(
          keys.slice(0, 2 * PER_EDGE).map((key, i) =>
            (i % 2 === 0 ? fx : other).post(clientReport(), {
              key: key.key,
              remoteAddress: from,
            }),
          ),
        );
      const answers = await sendAll();
      // Past the deployment's count a good key is told to send again in a second (serving it
      // would tell a guesser its guess is good): a 429 of its own, never the window's lock.
      const statuses = answers.map((a) => a.statusCode);
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
      expect(statuses).toContain(200);
      for (const a of answers.filter((a) => a.statusCode === 429))
        expect(a.headers["retry-after"]).toBe("1");
      // Sent again, every one is served (each key is known now).
      expect((await sendAll()).map((a) => a.statusCode)).toStrictEqual(
        Array(2 * PER_EDGE).fill(200),
      );
      // Not refused afterwards: a key neither edge has seen is served too.
      const last = keys.at(-1) as TestKey;
      expect((await send(last.key, from)).statusCode).toBe(200);
      expect(
        (await other.post(clientReport(), { key: last.key, remoteAddress: from })).statusCode,
      ).toBe(200);
      // Guesses from that client still meet the limit.
      const guesses: number[] = [];
      for (let i = 0; i < FAILURES + 1; i++)
        guesses.push((await send(generateKey(), from)).statusCode);
      expect(guesses).toStrictEqual([...Array(FAILURES).fill(401), 429]);
    } finally {
      await other.close();
    }
  });

  it("a Redis that went silently dead delays no attempt past the timeout; each process counts meanwhile", async () => {
    const proxy = await startTcpProxy(server.port);
    const viaProxy = new Redis(server.url.replace(`:${server.port}`, `:${proxy.port}`));
    const deployment = `t-dead-${Date.now()}`;
    const limits = createAuthFailureLimits({
      points: 3,
      windowS: 60,
      shared: { redis: viaProxy, deployment: `{${deployment}}` },
    });
    /** What the attempt came to, and how long it took to know. */
    const timed = async (addr: string) => {
      const t = performance.now();
      const outcome = await Promise.resolve()
        .then(() => limits.reserveAuthAttempt(addr, true))
        .then(
          () => "taken",
          (err: unknown) => (err instanceof Error ? err.message : String(err)),
        );
      return { outcome, ms: performance.now() - t };
    };
    /** The client's count in Redis (null: none there). */
    const inRedis = (addr: string) => admin.get(`headroom:auth-failures:${deployment}:${addr}`);
    try {
      // Counted in Redis once the count's own connection is up (a new client per try: attempts
      // made before that are counted by this process alone).
      let fresh = 0;
      const newClient = () => `198.51.100.${++fresh}`;
      await eventually(
        async () => {
          const addr = newClient();
          expect((await timed(addr)).outcome).toBe("taken");
          expect(await inRedis(addr)).toBe("1");
        },
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      expect((await timed(ip(30))).outcome).toBe("taken");
      expect(await inRedis(ip(30))).toBe("1");

      // Every open connection goes silently dead: an attempt waits at most the timeout, and the
      // process's own count decides (two more attempts, then the 429).
      expect(proxy.freeze()).toBeGreaterThanOrEqual(2);
      const dead = [await timed(ip(30)), await timed(ip(30)), await timed(ip(30))];
      expect(dead.map((d) => d.outcome)).toStrictEqual([
        "taken",
        "taken",
        "too many failed authentication attempts",
      ]);
      for (const d of dead) expect(d.ms).toBeLessThan(SHARED_TIMEOUT_MS + 1_000);

      // The dead connection was replaced by itself: a new client is counted in Redis again.
      await eventually(
        async () => {
          const addr = newClient();
          expect((await timed(addr)).outcome).toBe("taken");
          expect(await inRedis(addr)).toBe("1");
        },
        { timeoutMs: 10_000, intervalMs: 100 },
      );
    } finally {
      await limits.close();
      viaProxy.disconnect();
      await proxy.close();
    }
  });
});
