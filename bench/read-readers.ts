import { type ReadersSpec, runReaders } from "./read-load.js";

// The read phase's readers, a process of their own (run compiled, dist/bench/read-readers.js) so
// that their CPU shows apart from the benchmark's and the freshness probe does not wait behind
// them. Takes a ReadersSpec as JSON in argv[2], prints one ReadLoadResult JSON line, exits; also
// exits when its stdin closes (the benchmark that started it is gone).

const spec = JSON.parse(process.argv[2] ?? "{}") as ReadersSpec;
if (!Array.isArray(spec.keys) || !Array.isArray(spec.targets) || spec.readers < 1) {
  process.stderr.write("usage: read-readers.js '<ReadersSpec JSON>'\n");
  process.exit(2);
}
process.stdin.on("end", () => process.exit(1));
process.stdin.resume();

const cpuBefore = process.cpuUsage();
const startedAt = performance.now();
const result = await runReaders(spec);
const cpu = process.cpuUsage(cpuBefore);
result.clientCores =
  Math.round(((cpu.user + cpu.system) / ((performance.now() - startedAt) * 1000)) * 100) / 100;
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
