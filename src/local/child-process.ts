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
