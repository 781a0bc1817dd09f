import closeWithGrace from "close-with-grace";
import type { Logger } from "pino";

// SIGTERM/SIGINT (and an uncaught error) run `close` once, then exit: 0 after a clean close, 1
// after an error, a failed close, a second signal, or a close that hangs past the grace period,
// so a supervisor is never left waiting.

export function onShutdown(logger: Logger, close: () => Promise<void>, graceMs = 30_000): void {
  closeWithGrace(
    {
      delay: graceMs,
      logger: { error: (msg: unknown) => logger.error({ err: msg }, "shutdown") },
      onSecondSignal: (signal) => logger.warn({ signal }, "second signal: exiting now"),
      onTimeout: () => logger.error("shutdown took too long: exiting"),
    },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, "uncaught error: shutting down");
      else logger.info({ signal }, "shutting down");
      await close();
      logger.info("stopped");
    },
  );
}
