import { finishWithin, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { lastJsonLine } from "./load-spec.js";
import type { ReadersSpec, ReadLoadResult } from "./read-load.js";

// Runs the read phase's readers in their own process (bench/read-readers.ts, compiled).

export async function runReadersProcess(
  spec: ReadersSpec,
  cleanup: Cleanup,
): Promise<ReadLoadResult> {
  const child = spawnChild({
    name: "readers",
    entry: "bench/read-readers.ts",
    args: [JSON.stringify(spec)],
    cleanup,
  });
  const outcome = await finishWithin(child, (spec.durationS + 60) * 1000, "readers");
  const line = lastJsonLine(child.stdout());
  if (outcome.code !== 0 || line === undefined) {
    throw new Error(`readers failed (code ${outcome.code}):\n${child.tail()}`);
  }
  return JSON.parse(line) as ReadLoadResult;
}
