import { spawnChild } from "./child.js";
import type { Cleanup } from "./cleanup.js";
import type { SaturatingGenerator } from "./load-spec.js";
import { measureWarm, type WarmMeasure } from "./measure-warm.js";
import { type BatchPhase, runBatchPhase } from "./phase-batch.js";
import { type EdgePhase, runEdgePhase, warmUp } from "./phase-edge.js";
import { machine } from "./proc-stats.js";
import { writeLoadFiles } from "./report-bodies.js";
import type { RunInfo } from "./run-results.js";
import { sourceInfo } from "./source.js";
import { startStack } from "./stack.js";

// `npm run bench:edge`: issue 36's edge rows in one run. One stack (Redis, ClickHouse, no workers);
// for each generator and each number of connections, a bare Fastify server (warm-up, then
// measured), an edge with single reports, and an edge with batches of
// 100 (each a fresh process, warmed up) — each ratio compares the edge with the bare server under the same generator and
// connections, measured minutes apart at most.

export interface EdgeMatrixOptions {
  generators: SaturatingGenerator[];
  connections: number[];
  durationS: number;
  warmupS: number;
  keys: number;
  quick: boolean;
}

export interface EdgeMatrixCell {
  generator: SaturatingGenerator;
  connections: number;
  bare: WarmMeasure;
  edge: EdgePhase;
  batch: BatchPhase;
}

export interface EdgeMatrixRun extends RunInfo {
  cells: EdgeMatrixCell[];
}

export async function runEdgeMatrix(
  opts: EdgeMatrixOptions,
  command: string,
  cleanup: Cleanup,
  log: (msg: string) => void,
): Promise<EdgeMatrixRun> {
  const started = new Date();
  const source = sourceInfo();
  const stack = await startStack({ cleanup, log });
  const keys = {
    edge: await stack.createKeys("edge", opts.keys),
    warm: await stack.createKeys("warm", opts.keys),
    // The edge is measured, not the burst limit: batches reach far past a plan's rate.
    batch: await stack.createKeys("batch", opts.keys, { burst: 1_000_000 }),
  };
  // A fresh edge for each measured phase: its peak RSS is then its own, not a heap an earlier
  // phase grew (the kernel's peak can be reset, the heap's size cannot).
  const freshEdge = async () => {
    const edge = (await stack.startEdges(1)).at(-1);
    if (!edge) throw new Error("no edge started");
    return edge;
  };
  // A fresh bare server for each cell too, for the same reason: its peak RSS is the RSS row's
  // ceiling.
  const freshBare = async () => {
    const child = spawnChild({
      name: "bare fastify",
      entry: "bench/bare-server.ts",
      args: ["0"],
      cleanup,
    });
    const url = `http://127.0.0.1:${(await child.waitFor(/bare ready (\d+)/, 30_000))[1]}`;
    return { child, url };
  };

  const cells: EdgeMatrixCell[] = [];
  for (const generator of opts.generators) {
    for (const connections of opts.connections) {
      const at = `${generator}, ${connections} connections`;
      const load = { connections, generator };
      log(`bare Fastify (${at}): ${opts.warmupS} s warm-up, ${opts.durationS} s measured`);
      const bare = await freshBare();
      const bareRun = await measureWarm(
        {
          urls: [bare.url],
          ...writeLoadFiles(stack.dir, "bare", keys.edge),
          ...load,
          durationS: opts.durationS,
          mode: "saturate",
        },
        opts.warmupS,
        { "bare Fastify": bare.child.pid },
        cleanup,
      );
      await bare.child.stop();
      log(`  ${bareRun.load.okPerSec} req/s, peak RSS ${bareRun.peakRssMb["bare Fastify"]} MB`);

      log(`edge, single reports (${at}): ${opts.warmupS} s warm-up, ${opts.durationS} s measured`);
      let edge = await freshEdge();
      await warmUp(
        stack,
        [edge],
        { files: writeLoadFiles(stack.dir, "warm", keys.warm), ...load, durationS: opts.warmupS },
        cleanup,
      );
      const single = await runEdgePhase(
        stack,
        [edge],
        { files: writeLoadFiles(stack.dir, "edge", keys.edge), ...load, durationS: opts.durationS },
        cleanup,
      );
      // No workers here: the backlog is dropped, so Redis holds one phase's reports at most.
      await stack.dropQueues();
      await edge.child.stop();
      log(`  ${single.load.okPerSec} reports/s, peak RSS ${single.edgePeakRssMb} MB`);

      log(`edge, batches (${at}): ${opts.warmupS} s warm-up, ${opts.durationS} s measured`);
      edge = await freshEdge();
      const batch = await runBatchPhase(
        stack,
        [edge],
        { keys: keys.batch, ...load, durationS: opts.durationS, warmupS: opts.warmupS },
        cleanup,
      );
      await edge.child.stop();
      log(`  ${batch.reportsPerSec} reports/s, peak RSS ${batch.edgePeakRssMb} MB`);
      cells.push({ generator, connections, bare: bareRun, edge: single, batch });
    }
  }
  return {
    machine: machine(started),
    command,
    source,
    options: {
      ...opts,
      generators: opts.generators.join(","),
      connections: opts.connections.join(","),
    },
    settings: stack.settings,
    cells,
  };
}
