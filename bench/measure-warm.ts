import { mb } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import type { LoadResult, LoadSpec } from "./load-spec.js";
import { cpuMeter, peakRssBytes, resetPeakRss } from "./proc-stats.js";
import { runLoad } from "./run-load.js";

// A server measured warm: a fresh process runs unoptimised code for its first seconds, so
// `warmupS` of unmeasured load first, then the spec's load with the CPU and peak RSS of `pids`
// (the servers'; the generator measures its own).

export interface WarmMeasure {
  load: LoadResult;
  cpuCores: Record<string, number>;
  peakRssMb: Record<string, number>;
}

export async function measureWarm(
  spec: LoadSpec,
  warmupS: number,
  pids: Record<string, number>,
  cleanup: Cleanup,
): Promise<WarmMeasure> {
  await runLoad({ ...spec, durationS: warmupS }, cleanup);
  for (const pid of Object.values(pids)) resetPeakRss(pid);
  const cpu = cpuMeter(pids);
  const load = await runLoad(spec, cleanup);
  return {
    load,
    cpuCores: cpu.read().cores,
    peakRssMb: Object.fromEntries(Object.entries(pids).map(([n, p]) => [n, mb(peakRssBytes(p))])),
  };
}
