import type { ChildProcess } from "node:child_process";

// Stopping a child process we started, and waiting until it is really gone.

/** A server we run as a child process (redis-server, the embedded ClickHouse server). */
export interface ChildServer {
  url: string;
  port: number;
  process: ChildProcess;
  /** SIGTERM: the server shuts down cleanly; resolves once it has exited. */
  stop(): Promise<void>;
  /** SIGKILL: nothing is flushed or finished; resolves once it has exited. */
  kill(): Promise<void>;
}

export const isRunning = (child: ChildProcess) =>
  child.exitCode === null && child.signalCode === null;

export function exited(child: ChildProcess): Promise<void> {
  if (!isRunning(child)) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** Sends `signal` (if the child still runs) and resolves once it has exited. */
export async function signalAndWait(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (isRunning(child)) child.kill(signal);
  await exited(child);
}

/** The ChildServer of a started child: SIGTERM to stop, SIGKILL to kill. */
export function childServer(child: ChildProcess, url: string, port: number): ChildServer {
  return {
    url,
    port,
    process: child,
    stop: () => signalAndWait(child, "SIGTERM"),
    kill: () => signalAndWait(child, "SIGKILL"),
  };
}

/**
 * Polls `probe` until it answers true, failing as soon as the child exits or after `timeoutMs`.
 * `what` names the server in the errors.
 */
export async function waitUntilUp(
  child: ChildProcess,
  what: string,
  probe: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isRunning(child)) {
      throw new Error(
        `${what} exited during start (code ${child.exitCode}, signal ${child.signalCode})`,
      );
    }
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not answer within ${timeoutMs} ms`);
}
