import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

// Where the repository (the image's /app) is, whether this code runs compiled from dist/src/lib/
// or from the sources in src/lib/ (tsx, vitest).

export type Runtime = "compiled" | "source";

/** How this module itself runs: from dist/ or from the sources (tsx, vitest). */
export const currentRuntime: Runtime = import.meta.url.endsWith(".ts") ? "source" : "compiled";

export const ROOT = fileURLToPath(
  new URL(currentRuntime === "compiled" ? "../../../" : "../../", import.meta.url),
);

/** package.json's version: what `headroom --version` prints. */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string })
    .version;
}
