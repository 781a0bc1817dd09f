import { InvalidArgumentError } from "commander";
import { parseDuration, ruleMetricSchema } from "../alerts/rule.js";

// Option values checked as they are parsed, so a bad one is a usage error (exit 2) that names
// the option, before any connection is made.

const UNITS = { m: 60, h: 3_600, d: 86_400 } as const;

/** `30m`, `24h`, `7d` → seconds. */
export function parseSince(text: string): number {
  const m = /^(\d+)([mhd])$/.exec(text);
  if (!m) throw new InvalidArgumentError("Use a number and m, h or d, e.g. 30m, 24h, 7d.");
  return Number(m[1]) * UNITS[m[2] as keyof typeof UNITS];
}

/** A rule's `--metric`: a dimension name (requests, tokens, credits, input_tokens, …). */
export function dimension(text: string): string {
  const parsed = ruleMetricSchema.safeParse(text);
  if (!parsed.success) {
    throw new InvalidArgumentError(
      "Use a dimension: requests, tokens, credits, input_tokens, output_tokens, or another a provider names, in lowercase snake case (at most 64 characters).",
    );
  }
  return parsed.data;
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

/**
 * A monthly quota: a positive integer, or `none` for no quota. Not null for `none`: commander
 * turns a parser's null into "".
 */
export function quota(text: string): number | "none" {
  return text === "none" ? "none" : positiveInt(text);
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

/** A duration such as `90s`, `10m`, `2h` or `0` → seconds. */
export function duration(text: string): number {
  const s = parseDuration(text);
  if (s === null) throw new InvalidArgumentError("Use a number and s, m, h or d, e.g. 90s, 10m.");
  return s;
}

/** A percentage above 0 and at most 100. */
export function percent(text: string): number {
  const n = Number(text.replace(/%$/, ""));
  if (text.trim() === "" || !(n > 0 && n <= 100)) {
    throw new InvalidArgumentError("Use a number above 0 and at most 100.");
  }
  return n;
}

/** A percentage of 0 or more, below 50 (the hysteresis). */
export function points(text: string): number {
  const n = Number(text);
  if (text.trim() === "" || !(n >= 0 && n < 50)) {
    throw new InvalidArgumentError("Use a number from 0 to below 50.");
  }
  return n;
}
