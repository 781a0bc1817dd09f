import { createRequire } from "node:module";
import { type DestinationStream, type Logger, pino } from "pino";

// pino logs: JSON lines, except for a person at a terminal (stdout is a TTY, e.g. `npm start`),
// who gets pino-pretty's readable lines. Piped, in containers and in tests it stays JSON.
// Anything that could hold a key or a password is redacted wherever it appears.

export const REDACT_PATHS = [
  "req.headers.authorization",
  "headers.authorization",
  "authorization",
  "*.authorization",
  "password",
  "*.password",
  "key",
  "*.key",
];

export function createLogger(level: string, name: string, destination?: DestinationStream): Logger {
  const options = { level, name, redact: { paths: REDACT_PATHS, censor: "[redacted]" } };
  return pino(options, destination ?? (process.stdout.isTTY ? prettyStream() : undefined));
}

/** pino-pretty, loaded only when used; synchronous so no line is lost when a process exits. */
function prettyStream(): DestinationStream {
  const pretty = createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty");
  return pretty({ sync: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname" });
}
