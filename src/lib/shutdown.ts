import type { Logger } from "pino";

// SIGTERM/SIGINT run `close` once and exit 0; a second signal, or a close that hangs past the
// grace period, exits 1 so a supervisor is never left waiting.

export function onShutdown(logger: Logger, close: () => Promise<void>, graceMs = 30_000): void {
  let closing = false;
  const handler = (signal: NodeJS.Signals) => {
    if (closing) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    closing = true;
    logger.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      logger.error("shutdown took too long: exiting");
      process.exit(1);
    }, graceMs);
    timer.unref();
    close().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
}
