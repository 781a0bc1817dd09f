import { type ChildProcess, spawn } from "node:child_process";
import { entryArgs } from "../../src/local/entry-command.js";
import { workerMetric } from "./worker-metric.js";

// Headroom processes as a user runs them (`npm start`, the image: compiled, from dist/, which the
// integration tests' global setup builds), for tests that send real signals. Entries are source
// paths, e.g. "src/main/edge.ts".

export interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when a line of output matches, or rejects at the deadline or on exit. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  signal(sig: NodeJS.Signals): void;
}

export interface OutputWait {
  /** The process, for messages. */
  name: string;
  pattern: RegExp;
  /** The match in what the process has written so far, if any. */
  match: () => RegExpExecArray | null;
  alive: () => boolean;
  /** Called whenever output arrives or the process exits; `check` is added while waiting. */
  listeners: Set<() => void>;
  /** The end of the output, for the error message. */
  tail: () => string;
  timeoutMs: number;
}

/**
 * Resolves with the first match of a pattern in a process's output; rejects when the process
 * exits before it, or at the deadline. (The benchmark's children use it too.)
 */
export function waitForOutput(w: OutputWait): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = w.match();
      if (m) {
        done();
        resolve(m);
      } else if (!w.alive()) {
        done();
        reject(new Error(`${w.name} exited before ${w.pattern}:\n${w.tail().slice(-3_000)}`));
      }
    };
    const timer = setTimeout(() => {
      done();
      reject(
        new Error(
          `${w.name}: no ${w.pattern} within ${w.timeoutMs} ms:\n${w.tail().slice(-3_000)}`,
        ),
      );
    }, w.timeoutMs);
    const done = () => {
      clearTimeout(timer);
      w.listeners.delete(check);
    };
    w.listeners.add(check);
    check();
  });
}

export function startProcess(
  entry: string,
  env: Record<string, string>,
  nodeArgs: string[] = [],
): Proc {
  const child = spawn(process.execPath, [...nodeArgs, ...entryArgs(entry)], {
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
    async waitFor(pattern, timeoutMs = 30_000) {
      await waitForOutput({
        name: entry,
        pattern,
        match: () => pattern.exec(out),
        alive: () => child.exitCode === null && child.signalCode === null,
        listeners,
        tail: () => out,
        timeoutMs,
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
