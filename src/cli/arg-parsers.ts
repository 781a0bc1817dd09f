import { InvalidArgumentError } from "commander";

// Option values checked as they are parsed, so a bad one is a usage error (exit 2) that names
// the option, before any connection is made.

const UNITS = { m: 60, h: 3_600, d: 86_400 } as const;

/** `30m`, `24h`, `7d` → seconds. */
export function parseSince(text: string): number {
  const m = /^(\d+)([mhd])$/.exec(text);
  if (!m) throw new InvalidArgumentError("Use a number and m, h or d, e.g. 30m, 24h, 7d.");
  return Number(m[1]) * UNITS[m[2] as keyof typeof UNITS];
}

/** Returns the text itself once it is known to be a valid `--since`. */
export function since(text: string): string {
  parseSince(text);
  return text;
}

export function positiveInt(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n <= 0) {
    throw new InvalidArgumentError("Use a positive integer.");
  }
  return n;
}

/** A monthly quota: a positive integer, or `none` for no quota. */
export function quota(text: string): number | null {
  return text === "none" ? null : positiveInt(text);
}

export function port(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > 65_535) throw new InvalidArgumentError("Use 0 to 65535.");
  return n;
}

export function rate(text: string): number {
  const n = Number(text);
  if (text.trim() === "" || !(n >= 0 && n <= 1)) {
    throw new InvalidArgumentError("Use a number from 0 to 1.");
  }
  return n;
}
