import { runCli } from "../cli/run.js";

// The `headroom` command (bin/headroom.mjs runs this file).

// `headroom … | head`: a reader that stops early is not a failure of the command.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(0);
  throw err;
});

process.exitCode = await runCli(process.argv.slice(2));
