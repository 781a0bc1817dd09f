import { runAutocannon } from "./autocannon.js";
import { finishWithin, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { type LoadResult, type LoadSpec, parseLoadResult } from "./load-spec.js";
import { runWrk } from "./wrk.js";

// Runs one phase's load and returns what it measured: wrk (or autocannon, when the spec says so)
// when saturating, one per server; the open-loop client (bench/load.ts, compiled) at a fixed rate.

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
