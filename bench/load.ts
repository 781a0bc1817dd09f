import { runFixedRate } from "./fixed-rate.js";
import type { LoadResult, LoadSpec } from "./load-spec.js";
import { createBodySource } from "./report-bodies.js";
import { saturate } from "./saturate.js";

// The load generator, a process of its own so that its CPU shows apart from the servers'. Takes a
// LoadSpec as JSON in argv[2], prints one LoadResult JSON line on stdout, exits. It also exits
// when its stdin closes: the benchmark that started it is gone.

const spec = JSON.parse(process.argv[2] ?? "{}") as LoadSpec;
if (!spec.url || !Array.isArray(spec.keys) || spec.keys.length === 0) {
  process.stderr.write("usage: load.ts '<LoadSpec JSON>'\n");
  process.exit(2);
}
process.stdin.on("end", () => process.exit(1));
process.stdin.resume();

const bodies = createBodySource();
const cpuBefore = process.cpuUsage();
const startedAt = performance.now();
const result: LoadResult =
  spec.mode === "fixed" ? await runFixedRate(spec, bodies) : await saturate(spec, bodies);
const cpu = process.cpuUsage(cpuBefore);
const wallUs = (performance.now() - startedAt) * 1000;
result.generatorCores = Math.round(((cpu.user + cpu.system) / wallUs) * 100) / 100;
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
