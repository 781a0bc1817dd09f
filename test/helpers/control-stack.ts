import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LightMyRequestResponse } from "fastify";
import { Redis } from "ioredis";
import { inject } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { backupRedis } from "../../src/cli/backup.js";
import { cliPrincipal, createControl } from "../../src/control/service.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { createLogger } from "../../src/lib/logger.js";
import { uniqueId } from "./edge-fixture.js";
import { type Pipeline, startPipeline } from "./pipeline.js";

// The control plane's test stack: a pipeline of its own (embedded ClickHouse, names of its own)
// on a Redis database of its own (`db`: one per test file), so that a dump of the key store,
// the alert rules and the audit log holds this file's changes and no other file's. The edge and
// the read API (with the control plane beside it, CONTROL_LISTEN=api) log into `logs`.

export interface ControlStack {
  p: Pipeline;
  edge: Edge;
  api: Api;
  redis: Redis;
  /** Every log line of the edge and the API. */
  logs: string[];
  /** The control service as the CLI runs it. */
  control: ReturnType<typeof createControl>;
  cli: ReturnType<typeof cliPrincipal>;
  tag: string;
  /** A request to the API (control plane and read API) with a bearer key. */
  call(
    method: string,
    url: string,
    key?: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
  /** A request to the edge. */
  edgeCall(url: string, key: string, body: unknown): Promise<LightMyRequestResponse>;
  /** The store as a backup holds it (keys, rules, audit), last-use times left out. */
  dump(): Promise<string>;
  /** `npx headroom …` against this stack's Redis, as a person runs it. */
  headroom(
    args: string[],
    env?: Record<string, string>,
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  close(): Promise<void>;
}

export async function startControlStack(
  db: number,
  env: Record<string, string> = {},
): Promise<ControlStack> {
  const redisUrl = `${inject("redisUrl")}/${db}`;
  // This file's own database: emptied first, so the dumps hold this file's keys only.
  const redis = new Redis(redisUrl);
  await redis.flushdb();
  const p = await startPipeline({
    REDIS_URL: redisUrl,
    CONTROL_LISTEN: "api",
    // A revoked key is refused many times from one address in the matrix: 401, never 429.
    AUTH_FAILURES_PER_IP: "1000000",
    READ_BURST: "1000000",
    // The matrices write more than a minute's limit with one key: control.limits sets its own.
    CONTROL_WRITES_PER_MIN_PER_KEY: "1000000",
    CONTROL_WRITES_PER_MIN_PER_PROJECT: "1000000",
    ...env,
  });
  const logs: string[] = [];
  const sink = { write: (line: string) => void logs.push(line) };
  const logger = createLogger("debug", "test", sink);
  const edge = await createEdge(p.config, logger);
  const api = await createApi(p.config, logger, { clickhouse: p.client });
  const dataDir = mkdtempSync(join(tmpdir(), "headroom-control-"));

  const inject_ = (
    app: Api["app"],
    method: string,
    url: string,
    key: string | undefined,
    body: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.inject({
      method: method as "GET",
      url,
      headers: {
        ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });

  return {
    p,
    edge,
    api,
    redis,
    logs,
    control: createControl(p.redis, p.config),
    cli: cliPrincipal(),
    tag: uniqueId(),
    call: (method, url, key, body, headers) => inject_(api.app, method, url, key, body, headers),
    edgeCall: (url, key, body) => inject_(edge.app as Api["app"], "POST", url, key, body),
    async dump() {
      const backup = await backupRedis(redis, p.config.QUEUE_PREFIX);
      for (const entry of backup.keys) {
        if (entry.type !== "hash") continue;
        delete entry.value.last_used_at;
        // A large hash's fields come back in its hash table's order, which a rehash changes.
        entry.value = Object.fromEntries(
          Object.entries(entry.value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        );
      }
      return JSON.stringify(backup.keys);
    },
    headroom(args, env = {}) {
      const childEnv: Record<string, string> = {
        ...(process.env as Record<string, string>),
        HEADROOM_DATA_DIR: dataDir,
      };
      for (const k of ["REDIS_URL", "QUEUE_PREFIX", "CLICKHOUSE_URL", "CLICKHOUSE_DATABASE"]) {
        childEnv[k] = p.env[k] as string;
      }
      childEnv.ALERTS_WEBHOOK_ALLOW = p.env.ALERTS_WEBHOOK_ALLOW as string;
      Object.assign(childEnv, env);
      return new Promise((resolve) => {
        execFile(
          process.execPath,
          ["bin/headroom.mjs", ...args],
          { env: childEnv, timeout: 60_000 },
          (err, stdout, stderr) => {
            const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
            resolve({ code, stdout, stderr });
          },
        );
      });
    },
    async close() {
      await api.close();
      await edge.close();
      await p.close();
      await redis.quit();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
