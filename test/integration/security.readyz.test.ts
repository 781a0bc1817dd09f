import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/lib/logger.js";
import { localRedisOptions } from "../../src/local/local-stack.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { type EdgeFixture, startEdge } from "../helpers/edge-fixture.js";

// /readyz tells anyone whether the edge takes reports, and its figures (backlog size, Redis
// memory) only to the metrics token's holder. The local stack's own Redis has a maxmemory, so
// the memory gate measures something there; an edge whose Redis has none says so in its log.

const TOKEN = "readyz-test-token-0123456789";
let dir: string;
const edges: EdgeFixture[] = [];
const servers: RedisServer[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "headroom-readyz-"));
});

afterEach(async () => {
  for (const e of edges.splice(0)) await e.close();
  for (const s of servers.splice(0)) await s.stop();
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function edge(env: Record<string, string>, redisUrl?: string, lines?: string[]) {
  const logger = lines
    ? createLogger("warn", "test", { write: (line: string) => lines.push(line) })
    : undefined;
  const fx = await startEdge({
    env,
    ...(redisUrl ? { redisUrl } : {}),
    ...(logger ? { logger } : {}),
  });
  edges.push(fx);
  return fx;
}

interface Details {
  checks: { memory_gate: { on: boolean }; backlog: { memory_ratio: number | null } };
}

const readyz = (fx: EdgeFixture, authorization?: string) =>
  fx.edge.app.inject({
    method: "GET",
    url: "/readyz",
    ...(authorization ? { headers: { authorization } } : {}),
  });

describe("/readyz", () => {
  it("answers only ok or not to anyone without the metrics token", async () => {
    const open = await edge({});
    const res = await readyz(open);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toStrictEqual({ status: "ok" });

    const guarded = await edge({ METRICS_TOKEN: TOKEN });
    expect((await readyz(guarded)).json()).toStrictEqual({ status: "ok" });
    expect((await readyz(guarded, "Bearer not-the-token-at-all")).json()).toStrictEqual({
      status: "ok",
    });
    const detailed = await readyz(guarded, `Bearer ${TOKEN}`);
    expect(detailed.json()).toMatchObject({
      status: "ok",
      checks: { redis: { ok: true }, backlog: { ok: true, jobs: 0 } },
    });
  });

  it("says nothing of the backlog when it refuses, unless asked with the token", async () => {
    const full = await edge({
      METRICS_TOKEN: TOKEN,
      BACKLOG_MAX_JOBS: "1",
      BACKLOG_CHECK_INTERVAL_MS: "3600000",
    });
    const k = await full.createKey();
    for (let i = 0; i < 2; i++) await full.post({ provider: "openai", limits: {} }, { key: k.key });
    await full.edge.backlog.stop();
    await full.edge.backlog.start();
    const res = await readyz(full);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toStrictEqual({ status: "unavailable" });
    const detailed = await readyz(full, `Bearer ${TOKEN}`);
    expect(detailed.json()).toMatchObject({ reason: expect.stringMatching(/backlog of 2 jobs/) });
  });
});

describe("the memory gate", () => {
  it("has a bound on the local stack's own Redis", async () => {
    const server = await startRedisServer({
      ...localRedisOptions(loadConfig({}), join(dir, "local")),
      detached: false,
    });
    servers.push(server);
    const admin = new Redis(server.url);
    const [, maxmemory] = (await admin.config("GET", "maxmemory")) as [string, string];
    await admin.quit();
    expect(Number(maxmemory)).toBe(512 * 1024 * 1024);
    const fx = await edge({ METRICS_TOKEN: TOKEN }, server.url);
    const body = (await readyz(fx, `Bearer ${TOKEN}`)).json() as Details;
    expect(body.checks.memory_gate).toEqual({ on: true });
    expect(body.checks.backlog.memory_ratio).toBeGreaterThan(0);
  });

  it("is said to be off, in the log and to the token's holder, on a Redis without maxmemory", async () => {
    const server = await startRedisServer({ dir: join(dir, "unbounded"), appendonly: false });
    servers.push(server);
    const lines: string[] = [];
    const fx = await edge({ METRICS_TOKEN: TOKEN }, server.url, lines);
    expect(lines.join("\n")).toMatch(/redis has no maxmemory: the memory gate/);
    const body = (await readyz(fx, `Bearer ${TOKEN}`)).json() as Details;
    expect(body.checks.memory_gate).toEqual({ on: false });
  });
});
