import { type ChildProcess, spawn } from "node:child_process";
import { workerMetric } from "./worker-metric.js";

// Headroom processes as a user runs them (`tsx <entry>`), for tests that send real signals.

export interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when a line of output matches, or rejects at the deadline or on exit. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  signal(sig: NodeJS.Signals): void;
}

export function startProcess(
  entry: string,
  env: Record<string, string>,
  nodeArgs: string[] = [],
): Proc {
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", entry], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString();
    for (const l of listeners) l();
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      for (const l of listeners) l();
      resolve({ code, signal });
    }),
  );
  return {
    child,
    output: () => out,
    exited,
    signal: (sig) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
    waitFor(pattern, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pattern.test(out)) {
            done();
            resolve();
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(new Error(`${entry} exited before ${pattern}: ${out.slice(-2_000)}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${entry}: no ${pattern} within ${timeoutMs} ms: ${out.slice(-2_000)}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
  };
}

export interface WorkerProc {
  proc: Proc;
  metricsPort: number;
  /** Rows this worker has had acknowledged by ClickHouse (its own metrics). */
  inserted: () => Promise<number>;
}

/** Waits for an ingest worker process to be ready (started with WORKER_METRICS_PORT=0). */
export async function readyWorker(proc: Proc, timeoutMs = 30_000): Promise<WorkerProc> {
  await proc.waitFor(/worker ready/, timeoutMs);
  const metricsPort = Number(/"metricsPort":(\d+)/.exec(proc.output())?.[1]);
  const inserted = () => workerMetric(proc, "headroom_worker_rows_inserted_total");
  return { proc, metricsPort, inserted };
}
