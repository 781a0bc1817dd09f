import { runCli } from "../cli/run.js";

// The `headroom` command (bin/headroom.mjs runs this file).

process.exitCode = await runCli(process.argv.slice(2));
