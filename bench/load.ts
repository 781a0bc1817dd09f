import { readFileSync } from "node:fs";
import { runFixedRate } from "./fixed-rate.js";
import { fileLines, type LoadResult, type LoadSpec } from "./load-spec.js";

// The fixed-rate load generator, a process of its own (run compiled, dist/bench/load.js) so that
// its CPU shows apart from the servers'. Takes a LoadSpec as JSON in argv[2], prints one
// LoadResult JSON line on stdout, exits. It also exits when its stdin closes: the benchmark that
// started it is gone. (Saturated phases run wrk instead: bench/wrk.ts.)

const spec = JSON.parse(process.argv[2] ?? "{}") as LoadSpec;
if (spec.mode !== "fixed" || !Array.isArray(spec.urls) || spec.urls.length === 0) {
  process.stderr.write("usage: load.js '<LoadSpec JSON, mode fixed>'\n");
  process.exit(2);
}
process.stdin.on("end", () => process.exit(1));
process.stdin.resume();

const bodies = fileLines(readFileSync(spec.bodiesFile, "utf8"));
const keys = fileLines(readFileSync(spec.keysFile, "utf8"));
const cpuBefore = process.cpuUsage();
const startedAt = performance.now();
const result: LoadResult = await runFixedRate(spec, bodies, keys);
const cpu = process.cpuUsage(cpuBefore);
const wallUs = (performance.now() - startedAt) * 1000;
result.generatorCpuS = Math.round((cpu.user + cpu.system) / 10_000) / 100;
result.generatorCores = Math.round(((cpu.user + cpu.system) / wallUs) * 100) / 100;
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
