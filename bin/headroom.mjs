#!/usr/bin/env node
// The `headroom` command. Runs the TypeScript sources through tsx, so no build step is needed;
// a built image runs dist/src/main/cli.js directly.
import { register } from "tsx/esm/api";

register();
await import("../src/main/cli.ts");
