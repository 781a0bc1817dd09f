import { ensureBuilt } from "../src/local/entry-command.js";
import { runBench } from "./bench.js";
import { runCommand } from "./cleanup.js";
import { commandLine, OptionsError, parseBenchOptions, USAGE } from "./options.js";
import { renderMarkdown } from "./render.js";
import { writeResults, writeRun } from "./results.js";
import { renderViewsMarkdown, runViewsAlone } from "./views.js";
import { assertWrk, WrkMissingError } from "./wrk.js";

// `npm run bench`: parse options, run, write and print the results. Progress goes to stderr, the
// results table to stdout. Every process and temp dir is removed on the way out, whatever happens.

const log = (msg: string) =>
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

let opts: ReturnType<typeof parseBenchOptions>;
try {
  opts = parseBenchOptions(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof OptionsError)) throw err;
  process.stderr.write(`${err.message}\n\n${USAGE}\n`);
  process.exit(2);
}
if (!opts) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

// The ClickHouse server alone, compiled, without the rest of the stack.
if (opts.only === "clickhouse") {
  try {
    ensureBuilt();
  } catch {
    process.exit(1);
  }
  await runCommand(log, async (cleanup) => {
    const command = commandLine("bench", process.argv.slice(2));
    const results = await runViewsAlone(opts, cleanup, log, command);
    const md = renderViewsMarkdown(results);
    const files = writeRun(opts.outDir, results, md, null, "views-");
    process.stdout.write(`\n${md}\n`);
    log(`wrote ${files.join(", ")}`);
  });
}

try {
  assertWrk();
} catch (err) {
  if (!(err instanceof WrkMissingError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(2);
}
// Edge, workers, the ClickHouse server, the bare server and the fixed-rate client run compiled.
try {
  ensureBuilt();
} catch {
  process.exit(1); // the build said why on stderr
}

await runCommand(log, async (cleanup) => {
  const results = await runBench(opts, cleanup, log, commandLine("bench", process.argv.slice(2)));
  const files = writeResults(opts.outDir, results, opts.publishDir);
  process.stdout.write(`\n${renderMarkdown(results)}\n`);
  log(`wrote ${files.join(", ")}`);
});
