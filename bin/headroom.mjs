#!/usr/bin/env node
// The `headroom` command: runs the compiled CLI (dist/src/main/cli.js), compiling it first when
// the sources changed since the last build (bin/build-if-stale.mjs; messages go to stderr, so
// the command's output stays clean). A built image runs dist/src/main/cli.js directly.
import { buildIfStale } from "./build-if-stale.mjs";

try {
  await buildIfStale();
} catch (err) {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}
await import("../dist/src/main/cli.js");
