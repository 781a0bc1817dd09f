import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type Child, finishWithin, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { type LoadResult, type LoadSpec, lastJsonLine } from "./load-spec.js";

// The saturated phases' load generator: Debian's wrk (C, epoll), which costs a fraction of the
// CPU autocannon did for the same requests (bench/README.md), with bench/wrk-report.lua sending
// the sample bodies and keys. One wrk per server (edge), the connections split between them; the
// results are summed. wrk's per-response Lua callback is left out (it makes wrk parse every
// answer), so wrk counts failed answers without their status; the phases take the statuses from
// the edge's own metrics.

const SCRIPT = fileURLToPath(new URL("./wrk-report.lua", import.meta.url));

export class WrkMissingError extends Error {
  override name = "WrkMissingError";
  constructor() {
    super(
      "wrk was not found on PATH: the benchmark's load generator. Install it (Debian/Ubuntu: apt-get install -y wrk; macOS: brew install wrk) and run the benchmark again.",
    );
  }
}

export function assertWrk(command = "wrk"): void {
  const r = spawnSync(command, ["--version"], { stdio: "ignore" });
  // `wrk --version` prints its version and exits 1; only a missing program is an error here.
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === "ENOENT")
    throw new WrkMissingError();
}

/** What bench/wrk-report.lua's done() prints (times in microseconds). */
export interface WrkSummary {
  wrk: 1;
  durationUs: number;
  requests: number;
  bytes: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
  statuses: Record<string, number>;
  cpuSeconds: number;
}

export function parseWrkOutput(stdout: string): WrkSummary {
  const line = lastJsonLine(stdout);
  if (!line) throw new Error(`wrk printed no result:\n${stdout.slice(-2_000)}`);
  const r = JSON.parse(line) as WrkSummary;
  if (r.wrk !== 1 || typeof r.requests !== "number" || typeof r.latencyUs?.p99 !== "number") {
    throw new Error(`wrk printed a malformed result: ${line.slice(0, 300)}`);
  }
  return r;
}

/** Connections for each of `servers`, `total` in all, as even as it goes. */
export function splitConnections(total: number, servers: number): number[] {
  return Array.from(
    { length: servers },
    (_, i) => Math.floor(total / servers) + (i < total % servers ? 1 : 0),
  );
}

export function wrkArgs(opts: {
  url: string;
  connections: number;
  durationS: number;
  bodiesFile: string;
  keysFile: string;
  threads?: number;
  /** Count answers by status in Lua (costs wrk CPU per answer). */
  tally?: boolean;
  /** The request path (default /api/report). */
  path?: string;
  /** With bodiesFile "GET" (the read bench): the Accept-Encoding to send. */
  acceptEncoding?: string;
}): string[] {
  return [
    `--threads=${opts.threads ?? 1}`,
    `--connections=${opts.connections}`,
    `--duration=${opts.durationS}s`,
    "--timeout=10s",
    `--script=${SCRIPT}`,
    opts.url,
    "--",
    opts.bodiesFile,
    opts.keysFile,
    opts.tally ? "1" : "0",
    ...(opts.path ? [opts.path] : []),
    ...(opts.acceptEncoding !== undefined ? [opts.acceptEncoding] : []),
  ];
}

const ms = (us: number) => Math.round(us / 10) / 100;

/** What a saturating generator measured against one server: wrk's summary, or autocannon's in its shape. */
export type ServerSummary = Omit<WrkSummary, "wrk">;

/** One LoadResult from the summaries of the generator processes of one phase (one per server). */
export function mergeWrk(
  summaries: ServerSummary[],
  startedAt: number,
  generator = "wrk",
): LoadResult {
  let requests = 0;
  let failed = 0;
  let errors = 0;
  let okPerSec = 0;
  let cpuS = 0;
  let durationS = 0;
  let meanSum = 0;
  const statuses: Record<string, number> = {};
  const latency = { p50: 0, p90: 0, p99: 0, max: 0, mean: 0 };
  for (const s of summaries) {
    const seconds = s.durationUs / 1e6;
    const e = s.errors;
    requests += s.requests;
    failed += e.status;
    errors += e.connect + e.read + e.write + e.timeout;
    okPerSec += seconds > 0 ? (s.requests - e.status) / seconds : 0;
    cpuS += Math.max(0, s.cpuSeconds);
    durationS = Math.max(durationS, seconds);
    meanSum += s.latencyUs.mean * s.requests;
    for (const k of ["p50", "p90", "p99", "max"] as const) {
      latency[k] = Math.max(latency[k], ms(s.latencyUs[k]));
    }
    for (const [code, n] of Object.entries(s.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
  }
  latency.mean = requests > 0 ? ms(meanSum / requests) : 0;
  delete statuses["200"];
  // Without the Lua tally, wrk knows how many answers failed (status 400 and above), not with
  // which status.
  const tallied = Object.entries(statuses)
    .filter(([code]) => Number(code) >= 400)
    .reduce((a, [, n]) => a + n, 0);
  if (failed > tallied) statuses["4xx/5xx"] = failed - tallied;
  return {
    mode: "saturate",
    durationS: Math.round(durationS * 100) / 100,
    startedAt,
    sent: requests,
    ok: requests - failed,
    okPerSec: Math.round(okPerSec),
    statuses,
    errors,
    latencyMs: latency,
    unsent: 0,
    generatorCores: durationS > 0 ? Math.round((cpuS / durationS) * 100) / 100 : 0,
    generatorCpuS: Math.round(cpuS * 100) / 100,
    generator,
    generators: summaries.length,
  };
}

/**
 * Saturates every server of the spec for its duration, one generator process each (`start`),
 * the connections split between them; resolves with the sums.
 */
export async function runPerServer(
  spec: LoadSpec,
  generator: string,
  start: (url: string, connections: number, i: number) => Child,
  parse: (stdout: string) => ServerSummary,
): Promise<LoadResult> {
  const startedAt = Date.now();
  const limitMs = (spec.durationS + 30) * 1000;
  const conns = splitConnections(spec.connections, spec.urls.length);
  const runs = spec.urls.map(async (url, i) => {
    const child = start(url, conns[i] ?? 1, i);
    const outcome = await finishWithin(child, limitMs, generator);
    if (outcome.code !== 0) {
      throw new Error(`${generator} failed (code ${outcome.code}):\n${child.tail()}`);
    }
    return parse(child.stdout());
  });
  return mergeWrk(await Promise.all(runs), startedAt, generator);
}

/** Saturates every server of the spec for its duration, one wrk each; resolves with the sums. */
export function runWrk(spec: LoadSpec, cleanup: Cleanup): Promise<LoadResult> {
  assertWrk();
  return runPerServer(
    spec,
    "wrk",
    (url, connections, i) =>
      spawnChild({
        name: `wrk ${i + 1}`,
        command: "wrk",
        args: wrkArgs({
          url,
          connections,
          durationS: spec.durationS,
          bodiesFile: spec.bodiesFile,
          keysFile: spec.keysFile,
          path: spec.path,
          acceptEncoding: spec.acceptEncoding,
        }),
        cleanup,
      }),
    parseWrkOutput,
  );
}
