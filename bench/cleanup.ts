// Everything the benchmark starts registers how to undo it here; `run` undoes it all, newest
// first, once — at the end of a run, on an error, or on Ctrl-C / SIGTERM. Each step is bounded in
// time so that a process refusing to stop cannot keep the benchmark alive.

export interface Cleanup {
  /** Registers a step; returns a function that runs that step now (and only once). */
  add(name: string, step: () => Promise<void> | void): () => Promise<void>;
  run(): Promise<void>;
  /** True once `run` or a signal started the teardown. */
  readonly started: boolean;
  /** Ctrl-C and SIGTERM run every step, then exit with 130 / 143. */
  onSignals(log: (msg: string) => void): void;
}

interface Step {
  name: string;
  step: () => Promise<void> | void;
  done: boolean;
}

export function createCleanup(stepTimeoutMs = 15_000): Cleanup {
  const steps: Step[] = [];
  let running: Promise<void> | null = null;

  async function runStep(s: Step): Promise<void> {
    if (s.done) return;
    s.done = true;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.resolve().then(s.step),
        new Promise<void>((_, reject) => {
          timer = setTimeout(() => reject(new Error("timed out")), stepTimeoutMs);
        }),
      ]);
    } catch (err) {
      process.stderr.write(`cleanup: ${s.name}: ${(err as Error).message}\n`);
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    get started() {
      return running !== null;
    },
    add(name, step) {
      const s: Step = { name, step, done: false };
      steps.push(s);
      return () => runStep(s);
    },
    run() {
      running ??= (async () => {
        for (const s of [...steps].reverse()) await runStep(s);
      })();
      return running;
    },
    onSignals(log) {
      let signalled = false;
      const handler = (signal: NodeJS.Signals) => {
        if (signalled) {
          // A second Ctrl-C: stop waiting for a clean teardown.
          process.exit(1);
        }
        signalled = true;
        log(`${signal}: stopping every process the benchmark started`);
        void this.run().finally(() => process.exit(signal === "SIGINT" ? 130 : 143));
      };
      process.on("SIGINT", handler);
      process.on("SIGTERM", handler);
    },
  };
}

/**
 * Runs a benchmark command's `body` with a cleanup that Ctrl-C and SIGTERM run too, then stops
 * everything it started and exits: 0, or 1 after logging the error.
 */
export async function runCommand(
  log: (msg: string) => void,
  body: (cleanup: Cleanup) => Promise<void>,
): Promise<never> {
  const cleanup = createCleanup();
  cleanup.onSignals(log);
  let code = 0;
  try {
    await body(cleanup);
  } catch (err) {
    log(`failed: ${(err as Error)?.stack ?? String(err)}`);
    code = 1;
  } finally {
    log("stopping every process the benchmark started");
    await cleanup.run();
  }
  process.exit(code);
}
