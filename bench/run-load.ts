import { fileURLToPath } from "node:url";
import { spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { type LoadResult, type LoadSpec, parseLoadResult } from "./load-spec.js";

// Runs the load generator child for one phase and returns what it measured.

const LOAD_ENTRY = fileURLToPath(new URL("./load.ts", import.meta.url));

export async function runLoad(spec: LoadSpec, cleanup: Cleanup): Promise<LoadResult> {
  const child = spawnChild({
    name: `load generator (${spec.mode})`,
    entry: LOAD_ENTRY,
    args: [JSON.stringify(spec)],
    cleanup,
  });
  // Bounded: the phase, start-up, and the fixed mode's grace for the last answers.
  const limitMs = (spec.durationS + 45) * 1000;
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    child.exited,
    new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), limitMs);
    }),
  ]);
  clearTimeout(timer);
  await child.stop(2_000);
  if (outcome === "timeout") {
    throw new Error(`load generator did not finish within ${limitMs / 1000} s:\n${child.tail()}`);
  }
  if (outcome.code !== 0) {
    throw new Error(`load generator failed (code ${outcome.code}):\n${child.tail()}`);
  }
  return parseLoadResult(child.stdout());
}
