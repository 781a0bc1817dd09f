import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createKeyStore } from "../../src/keys/key-store.js";
import { entryArgs } from "../../src/local/entry-command.js";
import { type RedisServer, startRedisServer } from "../../src/local/redis-server.js";
import { createReportsQueue } from "../../src/queue/reports-queue.js";
import { clientReport, queuedRecords, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { freePort } from "../helpers/free-ports.js";

// Faults: Redis going away and coming back under a running edge, and SIGTERM on a real edge
// process under load. A 200 must always mean "in Redis".

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  // Last started, first stopped: the edge before the Redis under it.
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

describe("Redis stopped mid-test", () => {
  it("answers 503 (never 200) while Redis is down, and 200 again once it is back", async () => {
    const dir = mkdtempSync(join(tmpdir(), "headroom-faults-redis-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    let server: RedisServer = await startRedisServer({ dir, appendfsync: "always" });
    cleanups.push(async () => server.stop());
    const fx = await startEdge({
      redisUrl: server.url,
      env: { BACKLOG_CHECK_INTERVAL_MS: "20" },
    });
    cleanups.push(() => fx.close());
    const k = await fx.createKey();
    const accepted: string[] = [];
    const post = async () => {
      const res = await fx.post(clientReport(), { key: k.key });
      if (res.statusCode === 200) accepted.push((res.json() as { id: string }).id);
      return res;
    };

    for (let i = 0; i < 3; i++) expect((await post()).statusCode).toBe(200);

    await server.stop();
    const expectUnavailable = async () => {
      const res = await post();
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({ error: "unavailable" });
      expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
    };
    // Sequential and concurrent requests, before and after the edge's own poll notices.
    for (let i = 0; i < 10; i++) await expectUnavailable();
    await Promise.all(Array.from({ length: 20 }, expectUnavailable));
    await eventually(async () => {
      expect((await fx.edge.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(503);
    });
    await Promise.all(Array.from({ length: 20 }, expectUnavailable));
    expect(accepted).toHaveLength(3);

    // Back on the same port and data dir: the AOF brings back keys and queued reports.
    server = await startRedisServer({ dir, port: server.port, appendfsync: "always" });
    const statuses = new Set<number>();
    await eventually(
      async () => {
        const res = await post();
        statuses.add(res.statusCode);
        expect(res.statusCode).toBe(200);
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    for (const status of statuses) expect([200, 503]).toContain(status);
    for (let i = 0; i < 3; i++) expect((await post()).statusCode).toBe(200);

    const queued = (await fx.records()).map((r) => r.report_id).sort();
    expect(queued).toStrictEqual([...accepted].sort());
    expect(accepted).toHaveLength(7);
  });
});

interface Outcome {
  status?: number;
  body?: string;
  error?: string;
  /** The answer (or failure) came after SIGTERM was sent. */
  afterSigterm: boolean;
}

function postOnce(
  agent: Agent,
  port: number,
  key: string,
  body: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        agent,
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/api/report",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("SIGTERM under load", () => {
  it("exits 0, and every report that got a 200 is in the queue exactly once", async () => {
    const redisUrl = inject("redisUrl");
    const tag = uniqueId();
    const names = { prefix: `{t-${tag}}`, name: `reports-${tag}` };
    const redis = new Redis(redisUrl);
    const queue = createReportsQueue(redis, names);
    cleanups.push(async () => {
      await queue.obliterate({ force: true });
      await queue.close();
      await redis.quit();
    });
    const { key } = await createKeyStore(redis).create(`t-${tag}-sigterm`, {
      defaultPlan: "unlimited",
    });

    const port = await freePort();
    const child: ChildProcess = spawn(process.execPath, entryArgs("src/main/edge.ts"), {
      cwd: process.cwd(),
      env: {
        ...process.env,
        REDIS_URL: redisUrl,
        HOST: "127.0.0.1",
        PORT: String(port),
        QUEUE_PREFIX: names.prefix,
        QUEUE_NAME: names.name,
        LOG_LEVEL: "warn",
        // The load here is far over the default burst; the limit is not what this tests.
        PLANS: JSON.stringify({ unlimited: { monthly: null, burst: 1_000_000 } }),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.stderr?.on("data", (c: Buffer) => {
      output += c.toString();
    });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    });

    await eventually(
      async () => {
        expect(child.exitCode, output).toBeNull();
        const res = await fetch(`http://127.0.0.1:${port}/healthz`);
        expect(res.status).toBe(200);
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );

    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    cleanups.push(async () => agent.destroy());
    const outcomes: Outcome[] = [];
    let sigtermSent = false;
    let processGone = false;
    void exited.then(() => {
      processGone = true;
    });

    const loop = async () => {
      while (!processGone) {
        try {
          const res = await postOnce(agent, port, key, JSON.stringify(clientReport()));
          outcomes.push({ ...res, afterSigterm: sigtermSent });
        } catch (err) {
          outcomes.push({ error: (err as Error).message, afterSigterm: sigtermSent });
          // Connection refused once the listener is closed: nothing more to send.
          if (sigtermSent) await exited;
        }
      }
    };
    const loops = Array.from({ length: 32 }, loop);

    await eventually(
      () => expect(outcomes.filter((o) => o.status === 200).length).toBeGreaterThan(500),
      { timeoutMs: 20_000, intervalMs: 10 },
    );
    sigtermSent = true;
    child.kill("SIGTERM");
    const exit = await Promise.race([
      exited,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`no exit after SIGTERM: ${output}`)), 15_000),
      ),
    ]);
    await Promise.all(loops);

    expect(exit, output).toStrictEqual({ code: 0, signal: null });
    const ok = outcomes.filter((o) => o.status === 200);
    const ids = ok.map((o) => (JSON.parse(o.body ?? "") as { id: string }).id);
    expect(new Set(ids).size).toBe(ids.length);

    // Before SIGTERM: only 200s. After: 200s, contract 503s, or connection errors.
    expect(outcomes.filter((o) => !o.afterSigterm && o.status !== 200)).toStrictEqual([]);
    for (const o of outcomes.filter((o) => o.status !== undefined && o.status !== 200)) {
      expect(o.status, o.body).toBe(503);
      expect(JSON.parse(o.body ?? "")).toMatchObject({ error: "unavailable" });
    }

    const queued = (await queuedRecords(queue)).map((r) => r.report_id);
    const counts = new Map<string, number>();
    for (const id of queued) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect([...counts.values()].filter((n) => n > 1)).toStrictEqual([]);
    const missing = ids.filter((id) => !counts.has(id));
    expect(missing).toStrictEqual([]);
    expect(queued.length).toBe(ids.length);
  });
});
