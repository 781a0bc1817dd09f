import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

// The Docker engine of the test run, through test/docker/engine.sh: the engine that answers, or a
// private dockerd the script starts, shared with other runs (engine.sh stops it when the last
// process using it is done),
// with the offline-built base images the caller needs. Global setups of several Vitest projects
// run in one process, so the engine is shared and counted on globalThis.

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = fileURLToPath(new URL("./engine.sh", import.meta.url));
/** Debian's client: builds with BuildKit in the engine without the buildx plugin. */
export const DOCKER_CLI = process.env.HEADROOM_DOCKER_CLI || "/usr/bin/docker";

export type BaseImage = "node" | "redis";

export interface Engine {
  dockerHost: string;
  /** The private dockerd: this process is one of its users until its last release. */
  private: boolean;
  pid: string;
}

/** No engine answers and none can be started here; the message says what to install. */
export class NoEngineError extends Error {}

interface Shared {
  refs: number;
  engine?: Promise<Engine>;
}

const KEY = Symbol.for("headroom.test.docker-engine");
function shared(): Shared {
  const g = globalThis as { [KEY]?: Shared };
  g[KEY] ??= { refs: 0 };
  return g[KEY];
}

function script(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "bash",
      [SCRIPT, ...args],
      { env, maxBuffer: 16 * 1024 * 1024, timeout: 15 * 60_000 },
      (err, stdout, stderr) => {
        if (stderr.trim()) process.stderr.write(stderr);
        if (!err) return resolve(stdout);
        const message = `test/docker/engine.sh ${args.join(" ")} failed: ${stderr.trim() || err.message}`;
        reject(
          (err as { code?: unknown }).code === 3 ? new NoEngineError(message) : new Error(message),
        );
      },
    );
  });
}

async function up(): Promise<Engine> {
  const out = await script(["up", String(process.pid)]);
  const vars = new Map(
    out
      .split("\n")
      .filter((line) => line.includes("="))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
  const dockerHost = vars.get("DOCKER_HOST");
  if (!dockerHost) throw new Error(`engine.sh up printed no DOCKER_HOST:\n${out}`);
  return { dockerHost, private: vars.get("PRIVATE") === "1", pid: vars.get("PID") ?? "" };
}

/**
 * The engine, with `images` built. Points DOCKER_HOST of this process at it (testcontainers and
 * the docker CLI read it) and turns testcontainers' reaper off: its image cannot be had offline,
 * and every test removes what it starts.
 */
export async function acquireEngine(images: BaseImage[]): Promise<Engine> {
  const s = shared();
  s.refs += 1;
  try {
    s.engine ??= up();
    const engine = await s.engine;
    process.env.DOCKER_HOST = engine.dockerHost;
    process.env.TESTCONTAINERS_RYUK_DISABLED ??= "true";
    if (images.length > 0) await script(["images", ...images]);
    return engine;
  } catch (err) {
    await releaseEngine();
    throw err;
  }
}

export async function releaseEngine(): Promise<void> {
  const s = shared();
  s.refs -= 1;
  if (s.refs > 0 || !s.engine) return;
  const pending = s.engine;
  s.engine = undefined;
  const engine = await pending.catch(() => undefined);
  if (engine?.private) await script(["down", String(process.pid)]);
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

/** Runs a command (docker, docker-compose) against the engine; rejects with its output on failure. */
export function run(
  file: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        cwd: opts.cwd ?? REPO_ROOT,
        env: { ...process.env, ...opts.env },
        maxBuffer: 64 * 1024 * 1024,
        timeout: opts.timeoutMs ?? 120_000,
      },
      (err, stdout, stderr) => {
        if (err) {
          reject(
            new Error(
              `${file} ${args.join(" ")} failed (${err.message.split("\n")[0]}):\n${stderr.slice(-4000)}\n${stdout.slice(-2000)}`,
            ),
          );
        } else resolve({ stdout, stderr });
      },
    );
  });
}

export async function docker(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<string> {
  return (await run(DOCKER_CLI, args, opts)).stdout.trim();
}
