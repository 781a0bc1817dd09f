import { parseArgs } from "node:util";
import { ensureBuilt } from "../src/local/entry-command.js";
import { runCommand } from "./cleanup.js";
import { edgeMatrixResults, renderEdgeMatrix } from "./edge-matrix-figures.js";
import { type EdgeMatrixOptions, runEdgeMatrix } from "./edge-matrix-run.js";
import type { SaturatingGenerator } from "./load-spec.js";
import {
  commandLine,
  DEFAULT_OUT_DIR,
  OptionsError,
  PUBLISHED_DIR,
  positiveInt,
} from "./options.js";
import { writeRun } from "./results.js";
import { assertWrk, WrkMissingError } from "./wrk.js";

// `npm run bench:edge`: issue 36's edge rows (edge-matrix-run.ts), printed as one table and
// written to <out>/edge-latest.{json,md} (bench/runs; --publish: bench/results too).

const USAGE = `npm run bench:edge -- [options]
  --duration S        seconds per measured phase (default 15; 3 with --quick)
  --warmup S          seconds of load before each measured phase (default 10; 1 with --quick):
                      V8's compiler and GC threads still warming cost a 64-connection run
                      ~2x per report with 3 s (issue 48)
  --connections LIST  connections, comma-separated (default 64,512)
  --generators LIST   wrk and/or autocannon, comma-separated (default wrk,autocannon)
  --keys N            projects (default 20)
  --quick             short phases (the smoke test)
  --out DIR           where results go (default ${DEFAULT_OUT_DIR})
  --publish           also write ${PUBLISHED_DIR}/edge-latest.{json,md}`;

const log = (msg: string) =>
  process.stderr.write(`[bench:edge ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

function parseOptions(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      duration: { type: "string" },
      warmup: { type: "string" },
      connections: { type: "string", default: "64,512" },
      generators: { type: "string", default: "wrk,autocannon" },
      keys: { type: "string" },
      quick: { type: "boolean", default: false },
      out: { type: "string", default: DEFAULT_OUT_DIR },
      publish: { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return null;
  const generators = values.generators.split(",");
  for (const g of generators) {
    if (g !== "wrk" && g !== "autocannon") throw new OptionsError(`--generators: unknown ${g}`);
  }
  const opts: EdgeMatrixOptions = {
    generators: generators as SaturatingGenerator[],
    connections: values.connections.split(",").map((c) => positiveInt("connections", c, 1, 10_000)),
    durationS: positiveInt("duration", values.duration, values.quick ? 3 : 15, 3_600),
    warmupS: positiveInt("warmup", values.warmup, values.quick ? 1 : 10, 600),
    keys: positiveInt("keys", values.keys, 20, 10_000),
    quick: values.quick,
  };
  return { opts, out: values.out, publish: values.publish ? PUBLISHED_DIR : null };
}

let parsed: ReturnType<typeof parseOptions>;
try {
  parsed = parseOptions(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
  process.exit(2);
}
if (!parsed) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
try {
  if (parsed.opts.generators.includes("wrk")) assertWrk();
  ensureBuilt();
} catch (err) {
  if (err instanceof WrkMissingError) process.stderr.write(`${err.message}\n`);
  process.exit(2); // the build said why on stderr
}

const { opts, out, publish } = parsed;
await runCommand(log, async (cleanup) => {
  const command = commandLine("bench:edge", process.argv.slice(2));
  const results = edgeMatrixResults(await runEdgeMatrix(opts, command, cleanup, log));
  const md = renderEdgeMatrix(results);
  const files = writeRun(out, results, md, publish, "edge-");
  process.stdout.write(`\n${md}\n`);
  log(`wrote ${files.join(", ")}`);
});
