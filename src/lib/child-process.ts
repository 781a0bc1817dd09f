import type { ChildProcess } from "node:child_process";

// Stopping a child process we started, and waiting until it is really gone.

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
