import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import { createClickHouse } from "../clickhouse/client.js";
import { migrate, migrationContext } from "../clickhouse/migrations.js";
import { type Config, isSet } from "../config.js";
import { createKeyStore } from "../keys/key-store.js";
import { closeRedis, createWorkerRedis } from "../redis/connections.js";
import { redisTopology } from "../redis/topology.js";
import { isRunning } from "./child-process.js";
import {
  type EmbeddedClickHouseProcessOptions,
  spawnEmbeddedClickHouse,
} from "./clickhouse/process.js";
import { currentRuntime } from "./entry-command.js";
import { type RedisServerOptions, startRedisServer } from "./redis-server.js";
import { removeStackFile, writeStackFile } from "./stack-file.js";
import { createSupervisor } from "./supervisor.js";

// The whole service on one machine on embedded defaults: its own redis-server (AOF on,
// noeviction, STACK_REDIS_MAXMEMORY) unless REDIS_URL is set, the embedded ClickHouse server (on
// CLICKHOUSE_PATH) unless CLICKHOUSE_URL is set, migrations, then the edge, the read API, one
// worker and the alerts worker under a supervisor. Data lives in HEADROOM_DATA_DIR (./.data) and
// survives restarts; so do the local project's keys (one to report, one to read).

const LOCAL_PROJECT = "local";

interface LocalKey {
  key: string;
  key_id: string;
  project: string;
  /** The read API's key for the same project. */
  read_key: string;
}

export interface LocalStackOptions {
  config: Config;
  /** Start a redis-server of our own: no Redis was named (REDIS_URL's default is not a choice). */
  ownRedis: boolean;
  /** A child kept failing and was given up: the stack cannot serve, and must stop with an error. */
  onChildGaveUp(name: string): void;
  /** Where the children's output goes (the stack's log); else to this process's own. */
  follow?: (stdout: Readable | null, stderr: Readable | null) => void;
}

export async function startLocalStack(
  { config: base, ownRedis, onChildGaveUp, follow }: LocalStackOptions,
  logger: Logger,
) {
  const dataDir = resolve(base.HEADROOM_DATA_DIR);
  mkdirSync(dataDir, { recursive: true });
  const keyFile = join(dataDir, "local-key.json");
  const stops: (() => Promise<void>)[] = [];

  try {
    const redis = ownRedis ? await startRedisServer(localRedisOptions(base, dataDir)) : null;
    if (redis) stops.push(() => redis.stop());
    const clickhouse = base.CLICKHOUSE_URL
      ? null
      : await startStackClickHouse(base, dataDir, { inheritOutput: true, detached: true, follow });
    if (clickhouse) stops.push(() => clickhouse.server.stop());
    // Started in groups of their own: if this process exits without stopping them (a second
    // signal, a crash), they are told to stop rather than left behind.
    for (const server of [redis, clickhouse?.server]) {
      if (server)
        process.once(
          "exit",
          () => void (isRunning(server.process) && server.process.kill("SIGTERM")),
        );
    }

    const shared: Record<string, string> = {};
    if (redis) shared.REDIS_URL = redis.url;
    if (clickhouse) shared.CLICKHOUSE_URL = clickhouse.server.url;
    if (clickhouse?.generatedPassword) shared.CLICKHOUSE_PASSWORD = clickhouse.generatedPassword;
    // One person's machine: its own receivers on loopback are allowed unless the operator chose.
    // (For the children and the CLI only: the stack itself sends no webhook.)
    const allowLoopback: Record<string, string> = {};
    if (base.ALERTS_WEBHOOK_ALLOW.length === 0) {
      allowLoopback.ALERTS_WEBHOOK_ALLOW = LOCAL_WEBHOOK_ALLOW;
      logger.warn(
        { ALERTS_WEBHOOK_ALLOW: LOCAL_WEBHOOK_ALLOW },
        "alert webhooks may reach this machine (loopback); set ALERTS_WEBHOOK_ALLOW to choose",
      );
    }
    const config: Config = { ...base, ...shared };
    // The CLI (`headroom query`, `keys`, `stats`, `dlq`) finds this stack through this file.
    writeStackFile(dataDir, {
      ...shared,
      ...allowLoopback,
      CLICKHOUSE_DATABASE: config.CLICKHOUSE_DATABASE,
    });

    const ch = createClickHouse(config);
    await migrate(ch, migrationContext(config), (m) => logger.info(m));
    await ch.close();

    const local = await ensureLocalKey(config, keyFile);

    // Children run as the stack does: compiled under `npm start`, from the sources under
    // `npm run dev`.
    const supervisor = createSupervisor(logger, onChildGaveUp, currentRuntime, follow);
    // One person's machine, on loopback by default: the control plane is served beside the read
    // API unless CONTROL_LISTEN says otherwise (a server keeps it off, or on an internal port).
    const control: Record<string, string> = isSet(process.env, "CONTROL_LISTEN")
      ? {}
      : { CONTROL_LISTEN: "api" };
    // The key of the account hashes: made on first start and kept with the stack's data, so that
    // pools stay the same pools across restarts (docs/pools.md).
    const poolSecret: Record<string, string> = base.POOL_SECRET
      ? {}
      : { POOL_SECRET: keptSecret(dataDir, "pool-secret", 32) };
    const childEnv = {
      ...shared,
      ...allowLoopback,
      ...control,
      ...poolSecret,
      MIGRATE_ON_START: "false",
      // A stack killed without a word (SIGKILL) leaves no edge, API or worker running.
      STOP_WITH_PARENT_PID: String(process.pid),
    };
    supervisor.start({ name: "worker", entry: "workers/ingest.ts", env: childEnv });
    supervisor.start({ name: "alerts", entry: "workers/alerts.ts", env: childEnv });
    supervisor.start({ name: "edge", entry: "src/main/edge.ts", env: childEnv });
    supervisor.start({ name: "api", entry: "src/main/api.ts", env: childEnv });

    const host = config.HOST === "0.0.0.0" ? "127.0.0.1" : config.HOST;
    const listen = control.CONTROL_LISTEN ?? config.CONTROL_LISTEN;
    return {
      config,
      /** Where the control plane is served (its /api/v1 base), or null when it is off. */
      controlApi:
        listen === "off"
          ? null
          : `http://${host}:${listen === "api" ? config.API_PORT : listen}/api/v1`,
      endpoint: `http://${host}:${config.PORT}/api/report`,
      readApi: `http://${host}:${config.API_PORT}/api/v1`,
      page: `http://${host}:${config.API_PORT}/`,
      local,
      /**
       * Resolves once the edge and the read API answer on their ports (what the banner's curls
       * need), polling; rejects after `timeoutMs`.
       */
      async untilServing(timeoutMs: number) {
        const urls = [
          `http://${host}:${config.PORT}/healthz`,
          `http://${host}:${config.API_PORT}/healthz`,
        ];
        const deadline = Date.now() + timeoutMs;
        for (const url of urls) {
          while (!(await answers(url))) {
            if (Date.now() > deadline)
              throw new Error(`${url} did not answer within ${timeoutMs} ms`);
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      },
      async stop() {
        // Intake first, then the worker flushes, then the stores.
        await supervisor.stop(["edge", "api", "worker", "alerts"]);
        for (const stop of stops.reverse()) await stop();
        removeStackFile(dataDir);
      },
    };
  } catch (err) {
    // A failed start must not leave a redis-server or ClickHouse server behind.
    for (const stop of stops.reverse()) await stop().catch(() => {});
    throw err;
  }
}

const LOCAL_WEBHOOK_ALLOW = "127.0.0.0/8,::1";

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).ok;
  } catch {
    return false;
  }
}

/**
 * The embedded ClickHouse server, which never answers a query without credentials: unless a
 * password is configured, one is made on first start and kept, readable by its owner only, with
 * the stack's data (a webhook or a browser on this machine reaching the port carries none).
 */
export async function startStackClickHouse(
  config: Pick<
    Config,
    "CLICKHOUSE_PATH" | "STACK_CLICKHOUSE_PORT" | "CLICKHOUSE_USER" | "CLICKHOUSE_PASSWORD"
  >,
  dataDir: string,
  output: Pick<EmbeddedClickHouseProcessOptions, "inheritOutput" | "detached" | "follow"> = {
    inheritOutput: true,
    detached: true,
  },
) {
  const generatedPassword = config.CLICKHOUSE_PASSWORD ? undefined : stackPassword(dataDir);
  const server = await spawnEmbeddedClickHouse({
    path: resolve(config.CLICKHOUSE_PATH),
    port: config.STACK_CLICKHOUSE_PORT,
    user: config.CLICKHOUSE_USER === "default" ? undefined : config.CLICKHOUSE_USER,
    password: config.CLICKHOUSE_PASSWORD || generatedPassword,
    ...output,
    runtime: currentRuntime,
  });
  return { server, generatedPassword };
}

function stackPassword(dataDir: string): string {
  return keptSecret(dataDir, "clickhouse-password", 24);
}

/**
 * A random secret of `bytes` bytes (base64url) kept in `name` under the data dir, readable by its
 * owner only; made once.
 */
export function keptSecret(dataDir: string, name: string, bytes: number): string {
  const file = join(dataDir, name);
  if (existsSync(file)) {
    const saved = readFileSync(file, "utf8").trim();
    if (saved) return saved;
  }
  const secret = randomBytes(bytes).toString("base64url");
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

/** The local stack's own redis-server: bounded, so that the edge's memory gate has a bound. */
export function localRedisOptions(
  config: Pick<Config, "STACK_REDIS_PORT" | "STACK_REDIS_MAXMEMORY">,
  dataDir: string,
): RedisServerOptions {
  return {
    dir: join(dataDir, "redis"),
    port: config.STACK_REDIS_PORT,
    maxmemory: config.STACK_REDIS_MAXMEMORY,
    detached: true,
  };
}

/** First start: create the local project and key; later starts reuse them. */
async function ensureLocalKey(config: Config, keyFile: string): Promise<LocalKey> {
  const redis = createWorkerRedis(redisTopology(config));
  try {
    const store = createKeyStore(redis);
    const readKey = async () =>
      (await store.create(LOCAL_PROJECT, { defaultPlan: "unlimited", scope: "read" })).key;
    if (existsSync(keyFile)) {
      const saved = JSON.parse(readFileSync(keyFile, "utf8")) as Partial<LocalKey>;
      if (saved.key && (await store.lookup(saved.key))) {
        // A key file from before the read API gets its read key now.
        if (saved.read_key && (await store.lookup(saved.read_key))) return saved as LocalKey;
        const local = { ...(saved as LocalKey), read_key: await readKey() };
        writeFileSync(keyFile, JSON.stringify(local, null, 2), { mode: 0o600 });
        return local;
      }
    }
    const created = await store.create(LOCAL_PROJECT, { defaultPlan: "unlimited" });
    const local = {
      key: created.key,
      key_id: created.keyId,
      project: created.projectId,
      read_key: await readKey(),
    };
    // The plaintext is kept on this machine only, readable by its owner, for the local stack.
    writeFileSync(keyFile, JSON.stringify(local, null, 2), { mode: 0o600 });
    return local;
  } finally {
    await closeRedis(redis);
  }
}

export function curlExample(endpoint: string, key: string): string {
  const body = JSON.stringify({
    app: "my-app",
    provider: "openai",
    model: "gpt-4o-mini",
    timestamp: "NOW",
    limits: {
      requests_limit: 10000,
      requests_remaining: 9999,
      tokens_limit: 2000000,
      tokens_remaining: 1999000,
      reset_requests_ms: 6000,
      reset_tokens_ms: 30,
    },
  }).replace('"NOW"', `"'"$(date -u +%Y-%m-%dT%H:%M:%S.000Z)"'"`);
  return `curl -sS -X POST ${endpoint} \\\n  -H 'Authorization: Bearer ${key}' \\\n  -H 'Content-Type: application/json' \\\n  -d '${body}'`;
}

/** The page's address that signs in with `readKey`: in the fragment, never sent to the server. */
export function pageUrl(page: string, readKey: string): string {
  return `${page}#key=${encodeURIComponent(readKey)}`;
}
