import { type Config, loadConfig } from "../config.js";
import { readStackFile } from "../local/stack-file.js";

// What every CLI command starts from: the configuration, with the running local stack's
// addresses (written by `npm start` to stack.json in HEADROOM_DATA_DIR) as defaults for the
// variables the environment does not set.

export function cliConfig(env: Record<string, string | undefined> = process.env): Config {
  const own = loadConfig(env);
  const stack = readStackFile(own.HEADROOM_DATA_DIR);
  if (!stack) return own;
  const merged = { ...env };
  for (const [k, v] of Object.entries(stack)) if (!merged[k]) merged[k] = v;
  return loadConfig(merged);
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
