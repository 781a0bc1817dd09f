#!/usr/bin/env node
// Compiles the sources to dist/ when dist/ is missing or older than them, so that `npm start`,
// `npx headroom`, the benchmark and the tests run compiled JavaScript without anyone having to
// remember `npm run build`. Fresh: a scan of file times, a few milliseconds. Stale: `tsc` without
// type checking (`--noCheck`, a few seconds; `npm run typecheck` is what checks types, and tsx
// never did either), the OTLP .proto files (bin/copy-protos.mjs), then the page
// (bin/build-page.mjs); messages on stderr. Concurrent callers wait for one build (a lock directory).
//   node bin/build-if-stale.mjs          # exit 0 when dist/ is fresh or was built
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildPage } from "./build-page.mjs";
import { copyProtos } from "./copy-protos.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DIST = join(ROOT, "dist");
/** Written after a successful build, its time set to when the build started. */
const STAMP = join(DIST, ".build-stamp");
const LOCK = join(DIST, ".build-lock");
/** What the build reads (tsconfig.build.json's inputs and settings). */
const INPUTS = [
  "src",
  "workers",
  "bench",
  "tsconfig.json",
  "tsconfig.build.json",
  "bin/build-page.mjs",
  "bin/copy-protos.mjs",
];
const LOCK_STALE_MS = 120_000;

/** Newest modification time under a path: files and directories (an added or removed file). */
function newestMtime(path) {
  let st;
  try {
    st = statSync(path);
  } catch {
    return 0;
  }
  let newest = st.mtimeMs;
  if (st.isDirectory()) {
    for (const name of readdirSync(path)) {
      if (name === "results" || name === "node_modules") continue;
      newest = Math.max(newest, newestMtime(join(path, name)));
    }
  }
  return newest;
}

/** True when dist/ was not built by this script since the sources last changed. */
export function isStale(root = ROOT) {
  const stamp = join(root, "dist", ".build-stamp");
  if (!existsSync(stamp)) return true;
  const built = statSync(stamp).mtimeMs;
  return INPUTS.some((p) => newestMtime(join(root, p)) > built);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function lock() {
  mkdirSync(DIST, { recursive: true });
  for (;;) {
    try {
      mkdirSync(LOCK);
      return;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
    }
    // A build that died holding the lock must not block every later one.
    try {
      if (Date.now() - statSync(LOCK).mtimeMs > LOCK_STALE_MS) rmSync(LOCK, { recursive: true });
    } catch {
      // gone meanwhile
    }
    await sleep(100);
  }
}

function tscPath() {
  try {
    return createRequire(import.meta.url).resolve("typescript/bin/tsc");
  } catch {
    throw new Error(
      "dist/ is missing or older than the sources, and TypeScript is not installed to build it: run `npm ci` (with dev dependencies), then `npm run build`",
    );
  }
}

/**
 * Builds dist/ when it is stale; returns whether it built. `log` gets one line before a build.
 * Throws with tsc's output when the build fails.
 */
export async function buildIfStale(log = (msg) => process.stderr.write(`${msg}\n`)) {
  if (!isStale()) return false;
  await lock();
  try {
    // Another process may have built while this one waited for the lock.
    if (!isStale()) return false;
    log("headroom: compiling to dist/ (the sources changed since the last build) ...");
    const started = Date.now();
    const tsc = tscPath();
    try {
      execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json", "--noCheck"], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        encoding: "utf8",
      });
    } catch (err) {
      throw new Error(
        `the build (tsc -p tsconfig.build.json) failed:\n${err.stdout ?? ""}${err.stderr ?? ""}`,
      );
    }
    copyProtos({ root: ROOT });
    try {
      buildPage({ root: ROOT, check: false });
    } catch (err) {
      throw new Error(`the page's build failed:\n${err.stdout ?? ""}${err.stderr ?? err.message}`);
    }
    writeFileSync(STAMP, `${new Date(started).toISOString()}\n`);
    utimesSync(STAMP, started / 1000, started / 1000);
    return true;
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    await buildIfStale();
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}
