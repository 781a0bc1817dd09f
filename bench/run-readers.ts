import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { finishWithin, spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import { lastJsonLine } from "./load-spec.js";
import type { ReadersSpec, ReadLoadResult } from "./read-load.js";
import { assertWrk, parseWrkOutput, splitConnections, wrkArgs } from "./wrk.js";

// Runs the read phase's readers: node's (read-load.ts) in a process of their own
// (bench/read-readers.ts, compiled), or wrk's.
//
// wrk's (`--client wrk`): one wrk per endpoint, the readers split evenly between them, each
// connection asking again as soon as it is answered and going round the keys. wrk costs a tenth
// of node:http's CPU per request, so on a machine whose cores the readers share with the server,
// more of them go to what is measured. Latency is to the last byte, as read-load.ts takes it;
// wrk neither decodes nor checks the bodies, counts answers of 400 and above without their
// statuses, and times them with the rest (the figures over an endpoint with any of them are
// marked invalid: read-answers.ts). The node readers (read-load.ts) measure their own event loop
// too: a 1.9 MB answer decoded delays the answers of every other reader.

export async function runReadersProcess(
  spec: ReadersSpec,
  cleanup: Cleanup,
  /** Seconds after the run for the last answers: open loop past the API's rate queues them. */
  graceS = 60,
): Promise<ReadLoadResult> {
  const child = spawnChild({
    name: "readers",
    entry: "bench/read-readers.ts",
    args: [JSON.stringify(spec)],
    cleanup,
  });
  const outcome = await finishWithin(child, (spec.durationS + graceS) * 1000, "readers");
  const line = lastJsonLine(child.stdout());
  if (outcome.code !== 0 || line === undefined) {
    throw new Error(`readers failed (code ${outcome.code}):\n${child.tail()}`);
  }
  return JSON.parse(line) as ReadLoadResult;
}

export async function runWrkReaders(
  spec: ReadersSpec,
  dir: string,
  cleanup: Cleanup,
): Promise<ReadLoadResult> {
  assertWrk();
  // wrk asks one fixed path: a range computed per poll is the node readers' (read-targets.ts).
  const templated = spec.targets.find((t) => t.query !== undefined);
  if (templated) throw new Error(`wrk cannot ask ${templated.name}: its range moves per poll`);
  const keysFile = join(dir, "read-wrk.keys");
  writeFileSync(keysFile, `${spec.keys.join("\n")}\n`);
  const conns = splitConnections(spec.readers, spec.targets.length);
  const runs = spec.targets.map(async (target, i) => {
    const child = spawnChild({
      name: `wrk ${target.name}`,
      command: "wrk",
      args: wrkArgs({
        url: spec.url,
        connections: conns[i] ?? 1,
        durationS: spec.durationS,
        bodiesFile: "GET",
        keysFile,
        path: target.path,
        acceptEncoding: spec.acceptEncoding,
      }),
      cleanup,
    });
    const outcome = await finishWithin(child, (spec.durationS + 30) * 1000, "wrk");
    if (outcome.code !== 0) throw new Error(`wrk failed (code ${outcome.code}):\n${child.tail()}`);
    return { target, summary: parseWrkOutput(child.stdout()) };
  });
  const results = await Promise.all(runs);
  const ms = (us: number) => Math.round(us / 10) / 100;
  let cpuS = 0;
  let requests = 0;
  const byEndpoint: ReadLoadResult["byEndpoint"] = {};
  for (const [i, { target, summary: s }] of results.entries()) {
    const seconds = s.durationUs / 1e6;
    const failed = s.errors.status;
    const errors = s.errors.connect + s.errors.read + s.errors.write + s.errors.timeout;
    cpuS += Math.max(0, s.cpuSeconds);
    requests += s.requests;
    byEndpoint[target.name] = {
      readers: conns[i] ?? 1,
      requests: s.requests,
      perSec: Math.round(s.requests / seconds),
      statuses: {
        "200": s.requests - failed,
        ...(failed > 0 ? { "4xx/5xx": failed } : {}),
        ...(errors > 0 ? { error: errors } : {}),
      },
      latencyMs: {
        p50: ms(s.latencyUs.p50),
        p90: ms(s.latencyUs.p90),
        p99: ms(s.latencyUs.p99),
        max: ms(s.latencyUs.max),
        mean: ms(s.latencyUs.mean),
      },
      // Headers included: wrk counts what it read.
      bytes: {
        sent: Math.round(s.bytes / Math.max(1, s.requests)),
        decoded: 0,
        decodedAnswers: 0,
        encodings: {},
      },
    };
  }
  return {
    readers: spec.readers,
    model: spec.model,
    durationS: spec.durationS,
    requests,
    acceptEncoding: spec.acceptEncoding,
    decodeEvery: 0,
    byEndpoint,
    clientCores: Math.round((cpuS / spec.durationS) * 100) / 100,
  };
}
