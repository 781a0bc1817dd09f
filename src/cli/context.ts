import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type Config, loadConfig } from "../config.js";

// What every CLI command starts from: the configuration, with the running local stack's
// addresses (written by `npm start` to .data/stack.json) as defaults for variables not set.

export const STACK_FILE = join(".data", "stack.json");

export function cliConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const merged: Record<string, string | undefined> = { ...env };
  if (existsSync(STACK_FILE)) {
    const stack = JSON.parse(readFileSync(STACK_FILE, "utf8")) as Record<string, string>;
    for (const [k, v] of Object.entries(stack)) if (!merged[k]) merged[k] = v;
  }
  return loadConfig(merged);
}

export class UsageError extends Error {
  override name = "UsageError";
}

export function print(json: boolean, value: unknown, text: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text()}\n`);
}

/** A plain-text table: header row, then rows, columns padded to the widest cell. */
export function table(header: string[], rows: (string | number | null)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null ? "-" : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
