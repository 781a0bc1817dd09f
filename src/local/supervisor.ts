import { type ChildProcess, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import { entryArgs, type Runtime } from "./entry-command.js";

// Runs Headroom's processes side by side for the local stack. A child that dies unexpectedly is
// reported and restarted (with backoff, a few times), never silently ignored; stop() sends
// SIGTERM to each and waits for it to exit.

export interface ChildSpec {
  name: string;
  /** Source path from the repository root, e.g. "src/main/edge.ts". */
  entry: string;
  env: Record<string, string>;
}

interface Running {
  spec: ChildSpec;
  child: ChildProcess;
  restarts: number;
}

const MAX_RESTARTS = 5;

export function createSupervisor(
  logger: Logger,
  onGiveUp: (name: string) => void,
  runtime: Runtime = "compiled",
  /** Takes the children's output (the stack's log); else they write to this process's own. */
  follow?: (stdout: Readable | null, stderr: Readable | null) => void,
) {
  const running = new Map<string, Running>();
  let stopping = false;

  function launch(spec: ChildSpec, restarts: number): Running {
    const child = spawn(process.execPath, entryArgs(spec.entry, runtime), {
      env: { ...process.env, ...spec.env },
      stdio: follow ? ["ignore", "pipe", "pipe"] : ["ignore", "inherit", "inherit"],
      // Own process group: Ctrl-C reaches the supervisor only, which stops children in order.
      detached: true,
    });
    follow?.(child.stdout, child.stderr);
    const r: Running = { spec, child, restarts };
    running.set(spec.name, r);
    child.once("exit", (code, signal) => {
      if (stopping) return;
      logger.error({ process: spec.name, code, signal }, `${spec.name} exited unexpectedly`);
      if (restarts >= MAX_RESTARTS) {
        logger.fatal({ process: spec.name }, `${spec.name} keeps failing: giving up`);
        onGiveUp(spec.name);
        return;
      }
      const delay = Math.min(10_000, 500 * 2 ** restarts);
      logger.warn({ process: spec.name, delayMs: delay }, `restarting ${spec.name}`);
      setTimeout(() => {
        if (!stopping) launch(spec, restarts + 1);
      }, delay);
    });
    return r;
  }

  // If the supervisor itself dies, its children must not linger.
  process.once("exit", () => {
    for (const r of running.values()) if (r.child.exitCode === null) r.child.kill("SIGTERM");
  });

  return {
    start(spec: ChildSpec) {
      launch(spec, 0);
    },
    /** SIGTERM to every child, in the given order, each awaited. */
    async stop(order: string[]) {
      stopping = true;
      for (const name of order) {
        const r = running.get(name);
        if (!r) continue;
        const { child } = r;
        if (child.exitCode !== null || child.signalCode !== null) continue;
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        child.kill("SIGTERM");
        await exited;
      }
    },
  };
}
