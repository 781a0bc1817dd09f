import { spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { type ChildServer, childServer, signalAndWait, waitUntilUp } from "../child-process.js";
import { entryArgs, type Runtime } from "../entry-command.js";
import { freePort } from "../redis-server.js";

// The embedded ClickHouse server as a child process (src/main/clickhouse-serve.ts), for tests, the local stack and
// the benchmark: stoppable with SIGTERM, killable with SIGKILL, restartable on the same data
// directory and port so clients keep their URL.

export interface EmbeddedClickHouseProcessOptions {
  path: string;
  /** Reuse a port (a restart keeps the URL); a free one by default. */
  port?: number;
  user?: string;
  password?: string;
  /** See `faults` in server.ts. */
  faultErrorRate?: number;
  /** Inherit the child's output; tests keep it quiet. */
  inheritOutput?: boolean;
  /** Takes the child's output instead (the local stack's log). */
  follow?: (stdout: Readable | null, stderr: Readable | null) => void;
  /** Own process group: a terminal's Ctrl-C reaches only the supervisor, which stops us in order. */
  detached?: boolean;
  /** How long to wait for /ping to answer (default 30 s). */
  startTimeoutMs?: number;
  /** Compiled from dist/ (the default), or the sources through tsx (`npm run dev`). */
  runtime?: Runtime;
}

export type EmbeddedClickHouseProcess = ChildServer;

const SERVE_ENTRY = "src/main/clickhouse-serve.ts";

export async function spawnEmbeddedClickHouse(
  opts: EmbeddedClickHouseProcessOptions,
): Promise<EmbeddedClickHouseProcess> {
  if (opts.port !== undefined) return spawnOn(opts.port, opts);
  // A free port can be taken by another process before the server binds it (tests start many
  // servers at once): a port it did not choose itself is chosen again, a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnOn(await freePort(), opts);
    } catch (err) {
      if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
    }
  }
}

async function spawnOn(
  port: number,
  opts: EmbeddedClickHouseProcessOptions,
): Promise<EmbeddedClickHouseProcess> {
  const args = [
    ...entryArgs(SERVE_ENTRY, opts.runtime),
    "--path",
    opts.path,
    "--port",
    String(port),
  ];
  if (opts.faultErrorRate) args.push("--fault-error-rate", String(opts.faultErrorRate));
  // The child reads its config (log level, data directory) from this environment.
  const env: NodeJS.ProcessEnv = { ...process.env };
  // The child's credentials are exactly the ones asked for, never inherited by accident.
  delete env.CLICKHOUSE_USER;
  delete env.CLICKHOUSE_PASSWORD;
  if (opts.user) env.CLICKHOUSE_USER = opts.user;
  if (opts.password) env.CLICKHOUSE_PASSWORD = opts.password;
  // Whoever started it stops it; if that process is killed without a word, it stops itself
  // rather than hold the data directory (the next start would find it locked).
  env.STOP_WITH_PARENT_PID = String(process.pid);
  const child = spawn(process.execPath, args, {
    env,
    detached: opts.detached ?? false,
    stdio: opts.follow
      ? ["ignore", "pipe", "pipe"]
      : opts.inheritOutput
        ? ["ignore", "inherit", "inherit"]
        : ["ignore", "ignore", "pipe"],
  });
  opts.follow?.(child.stdout, child.stderr);
  // Keep the tail of stderr to explain a failed start.
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntilUp(
      child,
      `embedded ClickHouse on ${url}`,
      () => ping(url),
      opts.startTimeoutMs ?? 30_000,
    );
  } catch (err) {
    await signalAndWait(child, "SIGKILL");
    throw new Error(`${(err as Error).message}${stderr ? `\n${stderr}` : ""}`);
  }
  return childServer(child, url, port);
}

async function ping(url: string): Promise<boolean> {
  const res = await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1_000) });
  return res.ok && (await res.text()) === "Ok.\n";
}
