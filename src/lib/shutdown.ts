import closeWithGrace from "close-with-grace";
import type { Logger } from "pino";
import { stopWhenParentExits } from "./parent-watch.js";

// SIGTERM/SIGINT (and an uncaught error) run `close` once, then exit: 0 after a clean close, 1
// after an error, a failed close, a second signal, or a close that hangs past the grace period,
// so a supervisor is never left waiting.

const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

export interface ShutdownOptions {
  /**
   * A stop signal repeated within this many ms of the first is the same request, not a second
   * one: Ctrl-C in a terminal reaches `npm start` and its child both, and npm passes its own on.
   */
  sameRequestMs?: number;
}

/** Whether onShutdown has set up the stop: until then a stop has nothing to close. */
let closable = false;

/**
 * STOP_WITH_PARENT_PID (nothing when unset): once `parent` is not this one's parent, stop as on
 * SIGTERM, or exit at once while still starting (before onShutdown: nothing is served yet, and a
 * start waiting for a store that went with the parent would wait forever). Call it first, before
 * any await.
 */
export function stopWithParent(logger: Logger, parent: number | undefined): void {
  if (parent === undefined) return;
  const stop = () => {
    logger.warn("the process that started this one is gone: stopping");
    if (closable) process.kill(process.pid, "SIGTERM");
    else process.exit(1);
  };
  stopWhenParentExits(stop, 500, parent);
}

export function onShutdown(
  logger: Logger,
  close: () => Promise<void>,
  graceMs = 30_000,
  opts: ShutdownOptions = {},
): void {
  closable = true;
  const own = opts.sameRequestMs !== undefined;
  const graceful = closeWithGrace(
    {
      delay: graceMs,
      logger: { error: (msg: unknown) => logger.error({ err: msg }, "shutdown") },
      onSecondSignal: (signal) => logger.warn({ signal }, "second signal: exiting now"),
      onTimeout: () => logger.error("shutdown took too long: exiting"),
      // With sameRequestMs, the stop signals are counted here, below.
      skip: own ? [...STOP_SIGNALS] : [],
    },
    async ({ signal, err, manual }) => {
      if (err) logger.error({ err }, "uncaught error: shutting down");
      else if (!manual) logger.info({ signal }, "shutting down");
      await close();
      logger.info("stopped");
    },
  );
  if (!own) return;
  let first: number | undefined;
  for (const name of STOP_SIGNALS) {
    process.on(name, (signal: NodeJS.Signals) => {
      const now = Date.now();
      if (first === undefined) {
        first = now;
        logger.info({ signal }, "shutting down");
        void graceful.close();
      } else if (now - first > (opts.sameRequestMs ?? 0)) {
        logger.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
    });
  }
}
