#!/usr/bin/env node
// Copies the OpenTelemetry .proto files the OTLP receiver loads at run time (src/otlp/proto, with
// their licence) beside the compiled module that loads them: dist/src/otlp/proto. tsc emits only
// JavaScript, so `npm run build`, bin/build-if-stale.mjs and the Dockerfile run this after it.
//   node bin/copy-protos.mjs
import { cpSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Copies `<root>/src/otlp/proto` to `<root>/dist/src/otlp/proto`, replacing what was there. */
export function copyProtos({ root = ROOT } = {}) {
  const out = join(root, "dist", "src", "otlp", "proto");
  rmSync(out, { recursive: true, force: true });
  cpSync(join(root, "src", "otlp", "proto"), out, { recursive: true });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) copyProtos();
