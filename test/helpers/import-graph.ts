import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

// The repository's TypeScript modules and their relative imports, read from the files.

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");

export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

/** The files `file` imports by a relative path (static or dynamic import), as `.ts` paths. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from |import\()"(\.{1,2}\/[^"]+)"/g)]
    .map(([, spec]) => normalize(join(dirname(file), (spec as string).replace(/\.js$/, ".ts"))))
    .filter((path) => existsSync(path));
}

/** Every module reachable from `entries` through relative imports. */
export function reachable(entries: string[]): Set<string> {
  const seen = new Set<string>();
  const stack = [...entries];
  for (let file = stack.pop(); file !== undefined; file = stack.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    stack.push(...importsOf(file));
  }
  return seen;
}
