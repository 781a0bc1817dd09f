import { closeSync, openSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";

// The local stack's log: every process's JSON lines (the stack's own, its children's, the
// embedded ClickHouse server's) go whole to headroom.log in the data directory; the terminal,
// which a person reads, gets them as readable lines instead: all of them on a terminal (stdout a
// TTY), only warnings and errors when stdout is piped or a file, where the banner is the point.

export const stackLogPath = (dataDir: string) => join(dataDir, "headroom.log");

/** pino's level numbers: 40 is warn. */
const WARN = 40;

export interface StackLog {
  /** One line of output, JSON or not (a crash's stack trace), as a process wrote it. */
  line(text: string): void;
  /** Every line of a child's stdout and stderr, until they close. */
  follow(...streams: (Readable | null | undefined)[]): void;
  /**
   * Text for the person alone (the banner: it holds the keys, which the log never does), written
   * so that a terminal gone (closed, its pty removed) is no error.
   */
  say(text: string): void;
  /** A pino destination for the stack's own logger. */
  destination: { write(chunk: string): void };
  path: string;
  close(): void;
}

export interface StackLogOptions {
  /** What a person reads (process.stdout): written synchronously, so no line is lost at exit. */
  terminal: { fd: number; isTTY?: boolean };
}

export function openStackLog(dataDir: string, { terminal }: StackLogOptions): StackLog {
  const path = stackLogPath(dataDir);
  const file = openSync(path, "a", 0o600);
  const pretty = (
    createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty")
  ).prettyFactory({
    colorize: terminal.isTTY === true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname",
  });
  const write = (fd: number, text: string) => {
    try {
      writeSync(fd, text);
    } catch {
      // A closed terminal or a full disk must not stop the stack.
    }
  };
  const line = (text: string) => {
    if (text.trim() === "") return;
    write(file, `${text}\n`);
    let entry: { level?: unknown } | null = null;
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed !== null && typeof parsed === "object") entry = parsed as { level?: unknown };
    } catch {
      // Not a log line (a stack trace, a tool's own output): shown as it is.
    }
    if (entry === null) return write(terminal.fd, `${text}\n`);
    const level = typeof entry.level === "number" ? entry.level : WARN;
    if (terminal.isTTY || level >= WARN) write(terminal.fd, pretty(entry));
  };
  return {
    path,
    line,
    say: (text: string) => write(terminal.fd, text),
    follow(...streams) {
      for (const s of streams) {
        if (s) createInterface({ input: s, crlfDelay: Number.POSITIVE_INFINITY }).on("line", line);
      }
    },
    destination: {
      write: (chunk: string) => {
        for (const l of chunk.split("\n")) line(l);
      },
    },
    close: () => closeSync(file),
  };
}
