import type { AutocannonSpec } from "./autocannon-load.js";
import { spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { type LoadResult, type LoadSpec, lastJsonLine, REPORT_PATH } from "./load-spec.js";
import { runPerServer, type ServerSummary } from "./wrk.js";

// The other saturating generator (`generator: "autocannon"`): issue 36 found it and wrk
// disagreeing by about 1.5× on the same code, so the edge matrix runs both. One autocannon
// process per server (bench/autocannon-load.ts, compiled), merged as wrk's are.

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
