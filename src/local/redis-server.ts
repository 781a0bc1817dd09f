import { spawn, spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { Redis } from "ioredis";
import { type ChildServer, childServer, waitUntilUp } from "./child-process.js";
import { redisPidPath } from "./left-redis.js";

// A redis-server child process on a free port: for the test harness, the local stack and the
// benchmark. AOF on and `noeviction`, as production is configured (the topologies of
// redis-cluster.ts and redis-sentinel.ts turn persistence off and add their own settings).

export interface RedisServerOptions {
  dir: string;
  port?: number;
  maxmemory?: string;
  password?: string;
  appendfsync?: "always" | "everysec" | "no";
  /** AOF on (the default), or no persistence at all. */
  appendonly?: boolean;
  /** Start as a replica of this primary (a redis:// URL; its password becomes `masterauth`). */
  replicaOf?: string;
  /** More `--name value` settings, after ours (a cluster node's, for instance). */
  args?: string[];
  /** Inherit the child's output (the local stack); tests keep it quiet. */
  inheritOutput?: boolean;
  /** Own process group: a terminal's Ctrl-C reaches only the supervisor, which stops us in order. */
  detached?: boolean;
}

export type RedisServer = ChildServer;

export class RedisServerMissingError extends Error {
  override name = "RedisServerMissingError";
  constructor() {
    super(
      "redis-server was not found on PATH. Install Redis 7 (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) or set REDIS_URL to an existing server.",
    );
  }
}

export function hasRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startRedisServer(opts: RedisServerOptions): Promise<RedisServer> {
  if (!hasRedisServer()) throw new RedisServerMissingError();
  mkdirSync(opts.dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    opts.dir,
    // Read by the next start on this directory (left-redis.ts); removed by a clean shutdown.
    "--pidfile",
    redisPidPath(opts.dir),
    "--appendonly",
    opts.appendonly === false ? "no" : "yes",
    "--appendfsync",
    opts.appendfsync ?? "everysec",
    "--save",
    "",
    "--maxmemory-policy",
    "noeviction",
    "--protected-mode",
    "no",
    "--daemonize",
    "no",
    // A replica attaching (the topologies', the benchmark's) is sent the data at once, not after
    // Redis's default 5 s wait for more replicas to share one transfer.
    "--repl-diskless-sync-delay",
    "0",
    ...(opts.maxmemory ? ["--maxmemory", opts.maxmemory] : []),
    ...(opts.password ? ["--requirepass", opts.password] : []),
    ...(opts.replicaOf ? replicaOfArgs(opts.replicaOf) : []),
    ...(opts.args ?? []),
  ];
  const child = spawn("redis-server", args, {
    detached: opts.detached ?? false,
    stdio: opts.inheritOutput ? ["ignore", "inherit", "inherit"] : "ignore",
  });
  const auth = opts.password ? `:${encodeURIComponent(opts.password)}@` : "";
  const url = `redis://${auth}127.0.0.1:${port}`;
  await waitUntilUp(child, `redis-server on 127.0.0.1:${port}`, () => answersPing(url), 10_000);
  return childServer(child, url, port);
}

function replicaOfArgs(primaryUrl: string): string[] {
  const primary = new URL(primaryUrl);
  return [
    "--replicaof",
    primary.hostname,
    primary.port || "6379",
    ...(primary.password ? ["--masterauth", decodeURIComponent(primary.password)] : []),
  ];
}

/** True once the server at `url` answers PING with PONG (a sentinel does too). */
export async function answersPing(url: string): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    // Loading the AOF answers LOADING until done; wait for a real PONG.
    return (await client.ping()) === "PONG";
  } finally {
    client.disconnect();
  }
}
