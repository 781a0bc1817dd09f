import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/keys/key-format.js";
import { createLogger } from "../../src/lib/logger.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import {
  clientReport,
  type EdgeFixture,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { rawRequest } from "../helpers/raw-http.js";

// Edge hardening (issue 15): a request with two Authorization headers is refused; a key sent in
// the URL by mistake never reaches the log (nor a 404's body); concurrent key guesses cannot
// outrun the per-IP failure limit; a body refused for its content keeps the keep-alive
// connection, and what is pipelined behind a connection that must close is not processed.
//
// The edge runs on a redis-server of this file's own, so that Redis's own command counters
// (INFO commandstats) show exactly which requests reached Redis, with request logging on and
// every log line captured.

const FAILURES = 30;
const CRLF = "\r\n";

let dir: string;
let server: RedisServer;
let admin: Redis;
let fx: EdgeFixture;
let k: TestKey;
let port: number;
const logLines: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "headroom-hardening-"));
  server = await startRedisServer({ dir });
  admin = new Redis(server.url);
  fx = await startEdge({
    redisUrl: server.url,
    logger: createLogger("trace", "edge", { write: (line: string) => void logLines.push(line) }),
    env: {
      LOG_REQUESTS: "true",
      // No background polling: every Redis command during a test comes from its requests.
      BACKLOG_CHECK_INTERVAL_MS: "3600000",
      AUTH_FAILURES_PER_IP: String(FAILURES),
    },
  });
  k = await fx.createKey();
  await fx.edge.app.listen({ host: "127.0.0.1", port: 0 });
  port = (fx.edge.app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await fx?.close();
  await admin?.quit();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const BODY = JSON.stringify(clientReport());
const json = "Content-Type: application/json";
const auth = () => `Authorization: Bearer ${k.key}`;

/** A raw request: header lines, then the body with its Content-Length (unless told not to). */
function req(
  headers: string[],
  body: string | Buffer = BODY,
  o: { path?: string; contentLength?: boolean } = {},
): Buffer {
  const b = typeof body === "string" ? Buffer.from(body) : body;
  const lines = [`POST ${o.path ?? "/api/report"} HTTP/1.1`, "Host: edge", ...headers];
  if (o.contentLength !== false) lines.push(`Content-Length: ${b.length}`);
  return Buffer.concat([Buffer.from(lines.join(CRLF) + CRLF + CRLF, "latin1"), b]);
}

const queued = async () => (await fx.records()).length;

describe("two Authorization headers", () => {
  const cases: [string, () => string[]][] = [
    ["valid, then garbage", () => [auth(), "Authorization: Bearer hr_nope"]],
    ["valid twice", () => [auth(), auth()]],
    ["garbage, then valid", () => ["Authorization: Bearer hr_nope", auth()]],
    ["empty, then valid", () => ["Authorization: ", auth()]],
    [
      "names in other cases",
      () => [`authorization: Bearer ${k.key}`, `AUTHORIZATION: Bearer ${k.key}`],
    ],
  ];

  it.each(cases)("%s → 400 invalid_request, nothing queued", async (_, headers) => {
    const before = await queued();
    const res = await rawRequest(port, req([...headers(), json]));
    expect(res.status, res.body).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: "invalid_request" });
    expect(res.body).not.toContain(k.key);
    expect(await queued()).toBe(before);

    // The control: the same request with one of them is taken, and the count shows it.
    const one = await rawRequest(port, req([auth(), json]));
    expect(one.status).toBe(200);
    expect(await queued()).toBe(before + 1);
  });
});

describe("a key in the URL", () => {
  /** Every log line written while `fn` runs. */
  async function logsOf(fn: () => Promise<void>): Promise<string> {
    const from = logLines.length;
    await fn();
    return logLines.slice(from).join("");
  }
  const urlsIn = (logs: string) =>
    logs
      .split("\n")
      .filter(Boolean)
      .flatMap((l) => {
        const url = (JSON.parse(l) as { req?: { url?: string } }).req?.url;
        return url === undefined ? [] : [url];
      });

  it("in the query string of a report: accepted, and the logged URL has no query", async () => {
    let status = 0;
    const logs = await logsOf(async () => {
      const res = await fx.post(clientReport(), { key: k.key, url: `/api/report?key=${k.key}` });
      status = res.statusCode;
    });
    expect(status).toBe(200);
    expect(logs).not.toContain(k.key);
    expect(logs).not.toContain(k.key.slice(3, 20));
    expect(urlsIn(logs)).toStrictEqual(["/api/report?[redacted]"]);
  });

  const imported = "dlm_Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA";
  const bare = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
  const paths: [string, string, string][] = [
    ["an issued key", "/api/report/KEY", "/api/report/[redacted]"],
    ["an issued key and a query", "/api/report/KEY?key=KEY", "/api/report/[redacted]?[redacted]"],
    ["an imported key", `/v1/${imported}/report`, "/v1/[redacted]"],
    ["a key without a prefix", `/keys/${bare}`, "/keys/[redacted]"],
  ];

  it.each(paths)("in the path (%s): 404, neither body nor log shows it", async (_, p, logged) => {
    const path = p.replaceAll("KEY", k.key);
    let body = "";
    let status = 0;
    const logs = await logsOf(async () => {
      const res = await fx.post(clientReport(), { key: k.key, url: path, method: "GET" });
      status = res.statusCode;
      body = res.body;
    });
    expect(status).toBe(404);
    expect(JSON.parse(body)).toMatchObject({ error: "not_found" });
    for (const secret of [k.key, imported, bare]) {
      expect(body).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
    expect(urlsIn(logs)).toStrictEqual([logged]);
  });

  it("routes still show in the log and in a 404 as they are", async () => {
    const logs = await logsOf(async () => {
      const res = await fx.post(undefined, { url: "/api/nope", method: "GET" });
      expect(res.json()).toMatchObject({ message: "no route for GET /api/nope" });
    });
    expect(urlsIn(logs)).toStrictEqual(["/api/nope"]);
  });
});

describe("concurrent key guessing", () => {
  /** Commands Redis has run so far, all kinds, except our own INFO calls. */
  async function redisCalls(): Promise<number> {
    const text = await admin.info("commandstats");
    let total = 0;
    for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (m[1] !== "info") total += Number(m[2]);
    }
    return total;
  }
  const send = (key: string, remoteAddress: string) =>
    fx.post(clientReport(), { headers: { authorization: `Bearer ${key}` }, remoteAddress });
  const tally = (statuses: number[]) => {
    const t: Record<number, number> = {};
    for (const s of statuses) t[s] = (t[s] ?? 0) + 1;
    return t;
  };

  it("300 well-formed guesses at once from one IP: exactly the allowed look-ups, then 429", async () => {
    // The control: what one failed look-up costs in Redis commands, from another IP.
    let before = await redisCalls();
    expect((await send(generateKey(), "198.51.100.1")).statusCode).toBe(401);
    const perLookup = (await redisCalls()) - before;
    expect(perLookup).toBeGreaterThan(0);

    before = await redisCalls();
    const guesses = Array.from({ length: 300 }, () => generateKey());
    const statuses = await Promise.all(
      guesses.map(async (g) => (await send(g, "198.51.100.2")).statusCode),
    );
    expect(tally(statuses)).toStrictEqual({ 401: FAILURES, 429: 300 - FAILURES });
    expect(await redisCalls()).toBe(before + FAILURES * perLookup);

    // Other IPs are served as before.
    expect((await send(k.key, "198.51.100.3")).statusCode).toBe(200);
  });

  it("malformed guesses at once still cost no Redis call", async () => {
    const before = await redisCalls();
    const statuses = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const key = `hr_${"A".repeat(32)}${i % 10}`;
        return (await send(key, "198.51.100.4")).statusCode;
      }),
    );
    expect(tally(statuses)).toStrictEqual({ 401: FAILURES, 429: 100 - FAILURES });
    expect(await redisCalls()).toBe(before);
  });

  it("a burst of one new valid key from one IP is all accepted", async () => {
    // Cold cache: every request misses at once; valid keys must not use up the IP's failures.
    const fresh = await fx.createKey();
    const before = await queued();
    const statuses = await Promise.all(
      Array.from({ length: 200 }, async () => (await send(fresh.key, "198.51.100.5")).statusCode),
    );
    expect(tally(statuses)).toStrictEqual({ 200: 200 });
    expect(await queued()).toBe(before + 200);
  });
});

describe("pipelined requests", () => {
  const valid = () => req([auth(), json]);

  const refused: [string, () => Buffer, number][] = [
    ["invalid JSON", () => req([auth(), json], "{nope"), 400],
    ["empty body", () => req([auth(), json], ""), 400],
    ["unsupported charset", () => req([auth(), `${json}; charset=latin1`]), 415],
    ["invalid report", () => req([auth(), json], '{"provider":1,"limits":{}}'), 400],
    ["no content type", () => req([auth()]), 415],
    ["unknown key", () => req([`Authorization: Bearer ${generateKey()}`, json]), 401],
  ];

  it.each(refused)(
    "%s, then two valid: the connection stays open and all three are answered",
    async (_, first, status) => {
      const before = await queued();
      const bytes = Buffer.concat([first(), valid(), valid()]);
      const res = await rawRequest(port, bytes, { responses: 3 });
      expect(res.statuses).toStrictEqual([status, 200, 200]);
      expect(res.headers.connection).not.toBe("close");
      expect(await queued()).toBe(before + 2);
    },
  );

  /** Reports stored, once a request sent after `fn` has been answered: late stores show too. */
  async function storedBy(fn: () => Promise<void>): Promise<number> {
    const before = await queued();
    await fn();
    const barrier = await rawRequest(port, valid());
    expect(barrier.status).toBe(200);
    return (await queued()) - before - 1;
  }

  // Node reads no further than a fault in the framing, or than a request that ends the
  // connection; what it had read whole before is answered, in order, and then it closes.
  const closing: [string, () => Buffer, number[]][] = [
    [
      "broken chunked framing",
      () =>
        req([auth(), json, "Transfer-Encoding: chunked"], `zz${CRLF}{}${CRLF}0${CRLF}${CRLF}`, {
          contentLength: false,
        }),
      [200, 400],
    ],
    [
      "an HTTP/1.0 request (no keep-alive)",
      () => Buffer.from(req([auth(), json]).toString("latin1").replace("HTTP/1.1", "HTTP/1.0")),
      [200, 200],
    ],
    [
      "a request with Connection: close",
      () => req([auth(), json, "Connection: close"]),
      [200, 200],
    ],
  ];

  it.each(closing)(
    "valid, then %s, then valid: what came first is answered, nothing after is processed",
    async (_, second, expected) => {
      let statuses: number[] = [];
      const stored = await storedBy(async () => {
        const bytes = Buffer.concat([valid(), second(), valid()]);
        statuses = (await rawRequest(port, bytes, { responses: 3 })).statuses;
      });
      expect(statuses).toStrictEqual(expected);
      // Every stored report was answered 200: none taken and left without its answer.
      expect(stored).toBe(statuses.filter((s) => s === 200).length);
    },
  );

  it("a body over the limit behind a valid one: every stored report was answered", async () => {
    let statuses: number[] = [];
    const stored = await storedBy(async () => {
      const big = req([auth(), json], `{"provider":"x","pad":"${"x".repeat(40_000)}"}`);
      statuses = (await rawRequest(port, Buffer.concat([valid(), big, valid()]), { responses: 3 }))
        .statuses;
    });
    expect(statuses.slice(0, 2)).toStrictEqual([200, 413]);
    // Whether the connection survives the 413 or not, no report is stored without its answer.
    expect(stored).toBe(statuses.filter((s) => s === 200).length);
  });
});
