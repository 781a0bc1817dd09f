import { readFileSync } from "node:fs";
import autocannon from "autocannon";
import { fileLines } from "./load-spec.js";
import type { ServerSummary } from "./wrk.js";

// autocannon against one server, a process of its own (run compiled, dist/bench/autocannon-load.js)
// so that its CPU shows apart from the server's, as wrk's does. Takes an AutocannonSpec as JSON
// in argv[2], POSTs the bodies of the spec's file with its keys round-robin, as wrk-report.lua
// does, and prints one JSON line in wrk's summary shape (bench/wrk.ts merges it). Exits when its
// stdin closes: the benchmark that started it is gone.

export interface AutocannonSpec {
  url: string;
  connections: number;
  durationS: number;
  bodiesFile: string;
  keysFile: string;
  path: string;
}

/**
 * Distinct requests: autocannon formats every request of the list for each connection up front,
 * so 512 connections × wrk's 4,096 bodies would take the phase's first seconds.
 */
const MAX_REQUESTS = 256;

const spec = JSON.parse(process.argv[2] ?? "{}") as AutocannonSpec;
if (typeof spec.url !== "string" || !(spec.connections > 0) || !(spec.durationS > 0)) {
  process.stderr.write("usage: autocannon-load.js '<AutocannonSpec JSON>'\n");
  process.exit(2);
}
process.stdin.on("end", () => process.exit(1));
process.stdin.resume();

const keys = fileLines(readFileSync(spec.keysFile, "utf8"));
const requests = fileLines(readFileSync(spec.bodiesFile, "utf8"))
  .slice(0, MAX_REQUESTS)
  .map((body, i) => ({
    method: "POST" as const,
    path: spec.path,
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${keys[i % keys.length]}`,
    },
    body,
  }));

const cpuBefore = process.cpuUsage();
const r = await autocannon({
  url: spec.url,
  connections: spec.connections,
  duration: spec.durationS,
  timeout: 10,
  requests,
});
const cpu = process.cpuUsage(cpuBefore);
const us = (ms: number) => Math.round(ms * 1000);
const summary: ServerSummary & { autocannon: 1 } = {
  autocannon: 1,
  durationUs: Math.round(r.duration * 1e6),
  requests: r.requests.total,
  bytes: r.throughput.total,
  errors: {
    connect: 0,
    read: Math.max(0, r.errors - r.timeouts),
    write: 0,
    // As wrk counts them: answers of 400 and above.
    status: r["4xx"] + r["5xx"],
    timeout: r.timeouts,
  },
  latencyUs: {
    p50: us(r.latency.p50),
    p90: us(r.latency.p90),
    p99: us(r.latency.p99),
    max: us(r.latency.max),
    mean: us(r.latency.mean),
  },
  statuses: Object.fromEntries(
    Object.entries(r.statusCodeStats ?? {}).map(([code, s]) => [code, s.count ?? 0]),
  ),
  cpuSeconds: (cpu.user + cpu.system) / 1e6,
};
process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(0));
