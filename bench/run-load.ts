import type { AutocannonSpec } from "./autocannon-load.js";
import { finishWithin, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import {
  type LoadResult,
  type LoadSpec,
  lastJsonLine,
  parseLoadResult,
  REPORT_PATH,
} from "./load-spec.js";
import { runPerServer, runWrk, type ServerSummary } from "./wrk.js";

// Runs one phase's load and returns what it measured: wrk (or autocannon, when the spec says so)
// when saturating, one per server; the open-loop client (bench/load.ts, compiled) at a fixed rate.
// autocannon is there because issue 36 found it and wrk disagreeing by about 1.5× on the same
// code, so the edge matrix runs both: one process per server (bench/autocannon-load.ts,
// compiled), merged as wrk's are.

export async function runLoad(spec: LoadSpec, cleanup: Cleanup): Promise<LoadResult> {
  if (spec.mode === "saturate") {
    return spec.generator === "autocannon" ? runAutocannon(spec, cleanup) : runWrk(spec, cleanup);
  }
  const child = spawnChild({
    name: "load generator (fixed rate)",
    entry: "bench/load.ts",
    args: [JSON.stringify(spec)],
    cleanup,
  });
  // Bounded: the phase, start-up, and the fixed mode's grace for the last answers.
  const limitMs = (spec.durationS + 45) * 1000;
  const outcome = await finishWithin(child, limitMs, "load generator");
  if (outcome.code !== 0) {
    throw new Error(`load generator failed (code ${outcome.code}):\n${child.tail()}`);
  }
  return parseLoadResult(child.stdout());
}

export function parseAutocannonOutput(stdout: string): ServerSummary {
  const line = lastJsonLine(stdout);
  const r = line ? (JSON.parse(line) as ServerSummary & { autocannon?: 1 }) : null;
  if (r?.autocannon !== 1 || typeof r.requests !== "number") {
    throw new Error(`autocannon printed no result:\n${stdout.slice(-2_000)}`);
  }
  return r;
}

export function runAutocannon(spec: LoadSpec, cleanup: Cleanup): Promise<LoadResult> {
  if (spec.bodiesFile === "GET") throw new Error("autocannon: POST bodies only");
  return runPerServer(
    spec,
    "autocannon",
    (url, connections, i) => {
      const args: AutocannonSpec = {
        url,
        connections,
        durationS: spec.durationS,
        bodiesFile: spec.bodiesFile,
        keysFile: spec.keysFile,
        path: spec.path ?? REPORT_PATH,
      };
      return spawnChild({
        name: `autocannon ${i + 1}`,
        entry: "bench/autocannon-load.ts",
        args: [JSON.stringify(args)],
        cleanup,
      });
    },
    parseAutocannonOutput,
  );
}
