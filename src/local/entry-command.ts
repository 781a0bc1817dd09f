import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { currentRuntime, ROOT, type Runtime } from "../lib/repo-root.js";

// How a Headroom process is started: compiled JavaScript from dist/ (`npm start`, the benchmark,
// the tests, the image), or the TypeScript sources through tsx (`npm run dev`). Entries are named
// by their source path from the repository root, e.g. "src/main/edge.ts".

export { currentRuntime, type Runtime };

export class MissingBuildError extends Error {
  override name = "MissingBuildError";
}

/** The compiled file of an entry: dist/src/main/edge.js for src/main/edge.ts. */
export const compiledPath = (entry: string) => join(ROOT, "dist", entry.replace(/\.ts$/, ".js"));

/** The node arguments (before the entry's own) that run `entry` in the given runtime. */
export function entryArgs(entry: string, runtime: Runtime = "compiled"): string[] {
  if (runtime === "source") return ["--import", import.meta.resolve("tsx"), join(ROOT, entry)];
  const path = compiledPath(entry);
  if (!existsSync(path)) {
    throw new MissingBuildError(`${path} is missing: run \`npm run build\` first`);
  }
  return [path];
}

/**
 * Compiles dist/ when the sources changed since its last build (bin/build-if-stale.mjs): for
 * programs run from the sources (the benchmark, the test setup) that start compiled children.
 */
export function ensureBuilt(): void {
  execFileSync(process.execPath, [join(ROOT, "bin/build-if-stale.mjs")], {
    stdio: ["ignore", "inherit", "inherit"],
  });
}
