// What the benchmark asks of a load generator for one phase, and what it measured. Saturated
// phases run wrk (bench/wrk.ts), one per edge; the fixed-rate phase runs the open-loop client
// (bench/load.ts, compiled), which takes a LoadSpec as JSON and prints a LoadResult JSON line.

export interface LoadSpec {
  /** Origins of the servers, e.g. http://127.0.0.1:3000; connections are spread over them. */
  urls: string[];
  /** Request bodies, one per line, used round-robin (bench/report-bodies.ts writes them). */
  bodiesFile: string;
  /** Project keys, one per line, used round-robin (one Authorization header per request). */
  keysFile: string;
  /** Connections in all (split between the servers). */
  connections: number;
  durationS: number;
  /** saturate: every connection sends as fast as answers come; fixed: open loop at `rate`. */
  mode: "saturate" | "fixed";
  /** Requests per second of the fixed mode. */
  rate?: number;
  /** The request path of the saturated mode (default REPORT_PATH). */
  path?: string;
  /** The saturated mode's generator (default wrk): autocannon is the other one issue 36 names. */
  generator?: SaturatingGenerator;
  /** With bodiesFile "GET" (wrk): the Accept-Encoding to send. */
  acceptEncoding?: string;
}

export type SaturatingGenerator = "wrk" | "autocannon";

export interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface LoadResult {
  mode: LoadSpec["mode"];
  /** Seconds from the first request to the end of the sending window. */
  durationS: number;
  /** Wall clock (epoch ms) of the first request. */
  startedAt: number;
  sent: number;
  /** Successful answers (wrk: below 400; the fixed client: 200). */
  ok: number;
  /** Summed over the servers when there are several. */
  okPerSec: number;
  /**
   * Answers that were not successful, by status. wrk counts them without their status
   * ("4xx/5xx"); the phases replace that by the edge's own count by status where they can.
   */
  statuses: Record<string, number>;
  /** Connection errors and timeouts. */
  errors: number;
  /**
   * Latency in milliseconds; in fixed mode measured from the scheduled send time. With several
   * generators (one per edge): the highest of their percentiles, the mean weighted by requests.
   */
  latencyMs: Latency;
  /** Fixed mode: requests scheduled but never sent before the deadline (the target fell behind). */
  unsent: number;
  /** CPU the generator itself used, in cores (1 = one core busy the whole time). */
  generatorCores: number;
  /** The same in CPU seconds, over the phase. */
  generatorCpuS: number;
  /** Which generator: "wrk" or "autocannon" (saturated), or "open-loop client" (fixed rate). */
  generator: string;
  /** Generator processes (one wrk or autocannon per edge). */
  generators: number;
}

export const REPORT_PATH = "/api/report";

/** Parses the result line a load child printed (the last JSON line of its stdout). */
export function parseLoadResult(stdout: string): LoadResult {
  const line = lastJsonLine(stdout);
  if (!line) throw new Error("the load generator printed no result");
  const r = JSON.parse(line) as LoadResult;
  if (typeof r.ok !== "number" || typeof r.latencyMs?.p99 !== "number") {
    throw new Error(`the load generator printed a malformed result: ${line.slice(0, 200)}`);
  }
  return r;
}

export function lastJsonLine(stdout: string): string | undefined {
  return stdout
    .trim()
    .split("\n")
    .reverse()
    .find((l) => l.startsWith("{"));
}

/** The lines of a bodies or keys file. */
export const fileLines = (text: string): string[] => text.split("\n").filter((l) => l.length > 0);

/** Percentiles of a list of latencies (sorted in place). */
export function latencyOf(values: Float64Array): Latency {
  if (values.length === 0) return { p50: 0, p90: 0, p99: 0, max: 0, mean: 0 };
  values.sort();
  const at = (q: number) => values[Math.min(values.length - 1, Math.floor(q * values.length))] ?? 0;
  let sum = 0;
  for (const v of values) sum += v;
  const round = (v: number) => Math.round(v * 100) / 100;
  return {
    p50: round(at(0.5)),
    p90: round(at(0.9)),
    p99: round(at(0.99)),
    max: round(values[values.length - 1] ?? 0),
    mean: round(sum / values.length),
  };
}
