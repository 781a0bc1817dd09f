import { parseResetTime, resetAfter } from "./reset-time.js";
import type { Window, WindowLength, WindowWarning } from "./window.js";

// What every parser shares: reading one header as a count or a reset, turning junk into null with
// a warning (never an exception), and assembling windows that hold at least one figure.

/** A figure as a parser reads it: a value, or null (absent, or junk with a warning). */
export interface Figures {
  limit: number | null;
  remaining: number | null;
  resets_at: number | null;
}

const COUNT = /^-?\d+(?:\.\d+)?$/;

/** Seconds → the window length they name, for providers that state a window in seconds. */
const LENGTH_OF_SECONDS = new Map<number, WindowLength>([
  [1, "1s"],
  [10, "10s"],
  [60, "1m"],
  [3600, "1h"],
  [18_000, "5h"],
  [86_400, "1d"],
  [604_800, "7d"],
  [2_592_000, "1mo"],
  [2_678_400, "1mo"],
]);

export const windowOfSeconds = (seconds: number): WindowLength | null =>
  LENGTH_OF_SECONDS.get(seconds) ?? null;

/** Period words in header names → window length ("-day", "-minute", "-month", …). */
const LENGTH_OF_WORD = new Map<string, WindowLength>([
  ["second", "1s"],
  ["sec", "1s"],
  ["minute", "1m"],
  ["min", "1m"],
  ["hour", "1h"],
  ["day", "1d"],
  ["week", "7d"],
  ["month", "1mo"],
]);

export const windowOfWord = (word: string): WindowLength | null => LENGTH_OF_WORD.get(word) ?? null;

/** A provider's name for a dimension as Headroom writes it: lowercase snake case. */
export function dimensionName(raw: string): string {
  const name = raw
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "");
  if (name === "req" || name === "request") return "requests";
  if (name === "token") return "tokens";
  return name === "" ? "unknown" : name.slice(0, 64);
}

/** One report's headers (lowercase names, string values) and the warnings reading them made. */
export class HeaderReader {
  readonly windows: Window[] = [];
  private readonly read = new Set<string>();

  constructor(
    readonly headers: ReadonlyMap<string, string>,
    readonly at: number,
    readonly warnings: WindowWarning[] = [],
  ) {}

  get(name: string): string | undefined {
    return this.headers.get(name);
  }

  has(name: string): boolean {
    return this.headers.has(name);
  }

  /** Header names matching `pattern`, in the order the report gave them. */
  names(pattern: RegExp): string[] {
    return [...this.headers.keys()].filter((n) => pattern.test(n));
  }

  warn(name: string, message: string): void {
    const path = `headers.${name}`;
    if (this.read.has(`${path}\n${message}`)) return;
    this.read.add(`${path}\n${message}`);
    this.warnings.push({ path, message });
  }

  /**
   * A limit or remaining figure: a non-negative finite number. Negative values (Azure's -1 is a
   * sentinel for "not stated") and non-numbers become null with a warning.
   */
  count(name: string): number | null {
    const raw = this.headers.get(name);
    return raw === undefined ? null : this.countOf(name, raw);
  }

  /** `count` of a value found inside header `name` (one item of a structured header). */
  countOf(name: string, raw: string): number | null {
    const text = raw.trim();
    if (!COUNT.test(text)) {
      this.warn(name, `not a number: ${JSON.stringify(text.slice(0, 40))}`);
      return null;
    }
    const n = Number(text);
    if (!Number.isFinite(n)) {
      this.warn(name, "number out of range");
      return null;
    }
    if (n < 0) {
      this.warn(name, `negative figure ${text} (a sentinel), read as unknown`);
      return null;
    }
    return n;
  }

  /** A reset time, absolute Unix ms, in any format reset-time.ts reads. */
  reset(name: string): number | null {
    const raw = this.headers.get(name);
    return raw === undefined ? null : this.resetOf(name, raw);
  }

  /** `reset` of a value found inside header `name`. */
  resetOf(name: string, raw: string): number | null {
    const parsed = parseResetTime(raw, this.at);
    if (parsed.ok) return parsed.resets_at;
    this.warn(name, parsed.message);
    return null;
  }

  /**
   * A reset stated as a delay in ms from the answer (Azure's retry-after-ms): the delay read as a
   * count, then bounded as every reset is (reset-time.ts): past a year it is null with a warning.
   */
  resetAfterMs(name: string): number | null {
    const delay = this.count(name);
    if (delay === null) return null;
    const parsed = resetAfter(delay, this.at);
    if (parsed.ok) return parsed.resets_at;
    this.warn(name, parsed.message);
    return null;
  }

  /**
   * Adds a window when it holds at least one figure (a window of nulls says nothing, and would
   * hide the contract's own figure for that dimension). Remaining above limit is kept as the
   * provider stated it, with a warning: it is the provider's figure, not a reading error.
   */
  add(
    dimension: string,
    window: WindowLength | null,
    figures: Figures,
    paths: { limit?: string; remaining?: string } = {},
  ): void {
    const { limit, remaining, resets_at } = figures;
    if (limit === null && remaining === null && resets_at === null) return;
    if (limit !== null && remaining !== null && remaining > limit)
      this.warn(paths.remaining ?? dimension, `remaining ${remaining} exceeds limit ${limit}`);
    if (this.windows.some((w) => w.dimension === dimension && w.window === window)) return;
    this.windows.push({ dimension, window, limit, remaining, resets_at });
  }

  /**
   * A Retry-After (seconds or an HTTP date) is the reset of whatever ran out: windows at 0
   * remaining with no reset of their own take it.
   */
  applyRetryAfter(): void {
    const retry = this.reset("retry-after");
    if (retry === null) return;
    for (const w of this.windows)
      if (w.remaining === 0 && w.resets_at === null) w.resets_at = retry;
  }
}

/**
 * Headers as a parser reads them: lowercase names, string values. Non-string values (a stored
 * report's JSON could hold anything) are skipped with a warning.
 */
export function headerMap(
  headers: Readonly<Record<string, unknown>> | null | undefined,
  warnings: WindowWarning[],
): Map<string, string> {
  const map = new Map<string, string>();
  if (headers === null || headers === undefined || typeof headers !== "object") return map;
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (typeof value !== "string") {
      warnings.push({ path: `headers.${lower}`, message: "header value is not a string" });
      continue;
    }
    if (!map.has(lower)) map.set(lower, value);
  }
  return map;
}
