#!/usr/bin/env node
// Builds the headroom page into dist/page/: the browser's TypeScript (src/page/client, compiled by
// tsc to ES modules), the static files (src/page/static) and uPlot's minified script and style,
// copied from the package so that the page needs nothing from outside the process that serves it.
//   node bin/build-page.mjs
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Compiles and copies the page to `<root>/dist/page`; `check: false` skips type checking. */
export function buildPage({ root = ROOT, check = true } = {}) {
  const require = createRequire(join(root, "package.json"));
  const out = join(root, "dist", "page");
  rmSync(out, { recursive: true, force: true });
  const args = [require.resolve("typescript/bin/tsc"), "-p", "src/page/client/tsconfig.json"];
  execFileSync(process.execPath, check ? args : [...args, "--noCheck"], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
  });
  const statics = join(root, "src", "page", "static");
  for (const name of readdirSync(statics)) copyFileSync(join(statics, name), join(out, name));
  const uplot = dirname(require.resolve("uplot/package.json"));
  mkdirSync(join(out, "vendor"), { recursive: true });
  for (const name of ["uPlot.iife.min.js", "uPlot.min.css"]) {
    copyFileSync(join(uplot, "dist", name), join(out, "vendor", name));
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    buildPage();
  } catch (err) {
    process.stderr.write(
      `the page's build failed:\n${err.stdout ?? ""}${err.stderr ?? err.message}\n`,
    );
    process.exit(1);
  }
}
