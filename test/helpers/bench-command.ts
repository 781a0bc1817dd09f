import { spawn } from "node:child_process";

// A benchmark command (bench/<entry>.ts) run as a child process from the sources, as npm runs
// it, with its stdout and stderr together. Bounded: a hung harness is stopped (it cleans up on
// SIGTERM) and the caller sees its exit code.

export function runBenchCommand(
  entry: string,
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", entry, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      output += c.toString();
    });
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
