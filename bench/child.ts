import { type ChildProcess, spawn } from "node:child_process";
import { waitForOutput } from "../fixtures/processes.js";
import { entryArgs } from "../src/local/entry-command.js";
import type { Cleanup } from "./cleanup.js";

// A child process of the benchmark: a Node entry run compiled from dist/ (as `npm start` and the
// image run it; the benchmark builds dist/ first), or another program (wrk), with its output kept
// (a bounded tail) for readiness patterns and error messages. Every child is registered with the
// cleanup: SIGTERM first, SIGKILL when it does not exit in time.

export interface Child {
  name: string;
  process: ChildProcess;
  pid: number;
  /** Everything written to stdout (for children that print a result there). */
  stdout(): string;
  /** The last few KiB of stdout and stderr together. */
  tail(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first match in the output; rejects at the deadline or on exit. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

export interface ChildOptions {
  name: string;
  /** A Node entry by its source path, e.g. "src/main/edge.ts" (run as dist/src/main/edge.js)… */
  entry?: string;
  /** …or a program on the PATH, e.g. "wrk". */
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  /** Extra flags for node itself, e.g. --cpu-prof. */
  nodeArgs?: string[];
  cleanup: Cleanup;
  /** Told when the process exits without having been asked to stop (a crash), with its output. */
  onUnexpectedExit?: (message: string) => void;
}

const TAIL = 8_000;

export function spawnChild(opts: ChildOptions): Child {
  const [command, args] = opts.command
    ? [opts.command, opts.args ?? []]
    : [
        process.execPath,
        [...(opts.nodeArgs ?? []), ...entryArgs(opts.entry ?? ""), ...(opts.args ?? [])],
      ];
  const child = spawn(
    command,
    args,
    // stdin is a pipe that the child may watch: it closes when the benchmark dies.
    { env: { ...process.env, ...opts.env }, stdio: ["pipe", "pipe", "pipe"] },
  );
  if (child.pid === undefined) throw new Error(`${opts.name}: could not start`);
  let stdout = "";
  let tail = "";
  const listeners = new Set<() => void>();
  const append = (chunk: Buffer, isStdout: boolean) => {
    const text = chunk.toString();
    if (isStdout) stdout += text;
    tail = (tail + text).slice(-TAIL);
    for (const l of listeners) l();
  };
  child.stdout?.on("data", (c: Buffer) => append(c, true));
  child.stderr?.on("data", (c: Buffer) => append(c, false));
  child.stdin?.on("error", () => {});
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      for (const l of listeners) l();
      resolve({ code, signal });
    }),
  );
  const alive = () => child.exitCode === null && child.signalCode === null;
  let stopping = false;
  void exited.then(({ code, signal }) => {
    if (!stopping && !opts.cleanup.started) {
      opts.onUnexpectedExit?.(
        `${opts.name} exited unexpectedly (code ${code}, signal ${signal}):\n${tail.slice(-3_000)}`,
      );
    }
  });

  const stop = async (graceMs = 10_000) => {
    stopping = true;
    if (!alive()) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => {
      if (alive()) child.kill("SIGKILL");
    }, graceMs);
    await exited;
    clearTimeout(timer);
  };
  const stopNow = opts.cleanup.add(`stop ${opts.name}`, () => stop());

  return {
    name: opts.name,
    process: child,
    pid: child.pid,
    stdout: () => stdout,
    tail: () => tail,
    exited,
    waitFor: (pattern, timeoutMs = 30_000) =>
      waitForOutput({
        name: opts.name,
        pattern,
        match: () => pattern.exec(tail) ?? pattern.exec(stdout),
        alive,
        listeners,
        tail: () => tail,
        timeoutMs,
      }),
    stop: async (graceMs) => {
      await stop(graceMs);
      await stopNow();
    },
  };
}

/**
 * Waits for a child that ends by itself and resolves with how it exited; stops it, and fails
 * naming `what`, after `limitMs`.
 */
export async function finishWithin(
  child: Child,
  limitMs: number,
  what: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    child.exited,
    new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), limitMs);
    }),
  ]);
  clearTimeout(timer);
  await child.stop(2_000);
  if (outcome === "timeout") {
    throw new Error(`${what} did not finish within ${limitMs / 1000} s:\n${child.tail()}`);
  }
  return outcome;
}
