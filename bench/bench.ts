import { join } from "node:path";
import { loadConfig } from "../src/config.js";
import { capacityOf } from "./capacity.js";
import { measureBareFastify, measureBullmqAddBulk, measureClickHouseInsert } from "./ceilings.js";
import type { Cleanup } from "./cleanup.js";
import { summarize } from "./figure.js";
import { batchCapacityOf, buildFigures } from "./figures.js";
import type { BenchResults, PhaseResults } from "./run-results.js";
import type { BenchOptions } from "./options.js";
import { BATCH_SIZE, runBatchPhase } from "./phase-batch.js";
import { runDrainPhase } from "./phase-drain.js";
import { runEndToEndPhase } from "./phase-e2e.js";
import { runEdgePhase, warmUp } from "./phase-edge.js";
import { OTLP_PROVIDER_SPANS, OTLP_SPANS, runOtlpPhase } from "./phase-otlp.js";
import { runViewsPhase, type ViewsPhase } from "./phase-views.js";
import { machine } from "./proc-stats.js";
import { writeLoadFiles } from "./report-bodies.js";
import { sourceInfo } from "./source.js";
import { startStack } from "./stack.js";
import { viewsOptions } from "./views.js";

/** Connections of the fixed-rate phase's client (at most --connections). */
const FIXED_RATE_CONNECTIONS = 64;

// One benchmark run: start the stack, measure the ceilings, then the edge(s) alone, the workers
// draining their backlog, the whole pipeline saturated and at a fixed rate, and last the edge(s)
// alone with batches (its reports stored after it), and with OTLP exports (their reports dropped).
// ClickHouse's views are measured first, while nothing else inserts or merges.

export async function runBench(
  opts: BenchOptions,
  cleanup: Cleanup,
  log: (msg: string) => void,
  command = "npm run bench",
): Promise<BenchResults> {
  const started = new Date();
  const source = sourceInfo();
  const stack = await startStack({
    cleanup,
    log,
    nodeArgs: (name) =>
      opts.profile ? ["--cpu-prof", `--cpu-prof-dir=${join(opts.outDir, "profiles", name)}`] : [],
    shards: opts.shards,
    ackReplicas: opts.ackReplicas,
  });
  const config = loadConfig(stack.env);
  const keys = {
    edge: await stack.createKeys("edge", opts.keys),
    sat: await stack.createKeys("sat", opts.keys),
    rate: await stack.createKeys("rate", opts.keys),
    warm: await stack.createKeys("warm", opts.keys),
    // The edge is measured, not the burst limit: batches reach far past a plan's rate.
    batch: await stack.createKeys("batch", opts.keys, { burst: 1_000_000 }),
    otlp: await stack.createKeys("otlp", opts.keys, { burst: 1_000_000 }),
  };
  const load = { connections: opts.connections, durationS: opts.durationS };
  // Bodies stamped at the start of each phase, for wrk and the fixed-rate client.
  const files = (phase: string, phaseKeys: string[]) => writeLoadFiles(stack.dir, phase, phaseKeys);

  // Not with --quick, which must stay under its minute: `--only clickhouse --quick` runs it.
  let clickhouseViews: ViewsPhase | undefined;
  if (!opts.quick) {
    const views = viewsOptions(opts, config.BATCH_MAX_ROWS);
    log(
      `ClickHouse's views: ${views.rounds} rounds of ${views.insertsPerRound} inserts of ${views.rowsPerInsert} rows, every view / none / each alone`,
    );
    clickhouseViews = await runViewsPhase(stack.ch, stack.clickhouse.process.pid ?? 0, views, log);
    log(`  every view ÷ reports alone: ${clickhouseViews.figures.ratio.engineUs.toFixed(2)}×`);
  }

  log(`ceiling: bare Fastify, ${opts.durationS} s at ${opts.connections} connections (wrk)`);
  const bareFastify = await measureBareFastify(
    { files: files("bare", keys.edge), ...load, warmupS: opts.warmupS },
    cleanup,
  );
  log(`  ${bareFastify.load.okPerSec} req/s`);
  log(`ceiling: raw BullMQ addBulk, ${opts.ceilingS} s`);
  const bullmq = await measureBullmqAddBulk(stack, {
    seconds: opts.ceilingS,
    reportsPerJob: config.ENQUEUE_MAX_REPORTS,
    maxReports: opts.quick ? 200_000 : 2_000_000,
  });
  log(`  ${bullmq.reportsPerSec} reports/s`);
  log(`ceiling: raw ClickHouse insert, ${opts.ceilingS} s`);
  const clickhouse = await measureClickHouseInsert(stack, {
    seconds: opts.ceilingS,
    // As many rows as the worker's inserts hold (BATCH_MAX_ROWS): a smaller insert costs
    // ClickHouse more per row, and would make the worker's ceiling look lower than it is.
    rowsPerInsert: config.BATCH_MAX_ROWS,
  });
  log(`  ${clickhouse.rowsPerSec} rows/s`);

  const edges = await stack.startEdges(opts.edges);
  log(`edge warm-up: ${opts.warmupS} s (not measured, its reports dropped)`);
  await warmUp(
    stack,
    edges,
    { files: files("warm", keys.warm), connections: opts.connections, durationS: opts.warmupS },
    cleanup,
  );
  log(`  reports queue(s): ${stack.queueNames().join(", ")}`);
  log(
    `${edges.length === 1 ? "edge" : `${edges.length} edges`} alone: ${opts.durationS} s saturated`,
  );
  const edgeAlone = await runEdgePhase(
    stack,
    edges,
    { files: files("edge", keys.edge), ...load },
    cleanup,
  );
  log(`  ${edgeAlone.load.okPerSec} reports/s accepted, ${edgeAlone.enqueued} queued`);

  log(`worker drain: ${opts.workers} worker(s) on ${edgeAlone.enqueued} queued reports`);
  const drain = await runDrainPhase(stack, {
    phase: "edge",
    expected: edgeAlone.enqueued,
    workers: opts.workers,
    timeoutS: opts.drainTimeoutS,
  });
  log(`  ${drain.rowsPerSec} rows/s${drain.complete ? "" : " (deadline passed)"}`);

  log(`end to end, saturated: ${opts.durationS} s`);
  const saturation = await runEndToEndPhase(
    stack,
    edges,
    {
      phase: "sat",
      files: files("sat", keys.sat),
      ...load,
      mode: "saturate",
      timeoutS: opts.drainTimeoutS,
    },
    cleanup,
  );
  log(`  ${saturation.sustainedPerSec} reports/s sustained, lag p99 ${saturation.lagMs.p99} ms`);

  log(`end to end, fixed rate ${opts.rate}/s: ${opts.durationS} s`);
  const fixedRate = await runEndToEndPhase(
    stack,
    edges,
    {
      phase: "rate",
      files: files("rate", keys.rate),
      ...load,
      // A steady load comes from fewer connections at once than a saturating one.
      connections: Math.min(load.connections, FIXED_RATE_CONNECTIONS),
      mode: "fixed",
      rate: opts.rate,
      timeoutS: opts.drainTimeoutS,
    },
    cleanup,
  );
  log(`  p99 ${fixedRate.load.latencyMs.p99} ms, lag p99 ${fixedRate.lagMs.p99} ms`);

  log(
    `edge alone, batches of ${BATCH_SIZE}: ${opts.durationS} s saturated (queues paused), then stored`,
  );
  const edgeBatch = await runBatchPhase(
    stack,
    edges,
    {
      keys: keys.batch,
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      // Stored by the workers after the load: what a batched report costs the whole pipeline.
      store: { phase: "batch", timeoutS: opts.drainTimeoutS },
    },
    cleanup,
  );
  log(
    `  ${edgeBatch.reportsPerSec} reports/s accepted${edgeBatch.stored ? ", all stored" : ", NOT all stored by the deadline"}`,
  );

  log(
    `edge alone, OTLP exports of ${OTLP_SPANS} spans (${OTLP_PROVIDER_SPANS} provider calls): ${opts.durationS} s saturated (queues paused, dropped)`,
  );
  const edgeOtlp = await runOtlpPhase(
    stack,
    edges,
    { keys: keys.otlp, durationS: opts.durationS, warmupS: opts.warmupS },
    cleanup,
  );
  log(
    `  ${edgeOtlp.reportsPerSec} provider spans/s accepted, ${edgeOtlp.duplicates} answered as duplicates`,
  );

  const phases: PhaseResults = {
    ceilings: { bareFastify, bullmq, clickhouse },
    edgeAlone,
    edgeBatch,
    edgeOtlp,
    drain,
    saturation,
    fixedRate: { ...fixedRate, requestedRate: opts.rate },
  };
  const capacity = capacityOf(saturation);
  const batchCapacity = batchCapacityOf(edgeBatch);
  const figures = buildFigures(phases, capacity, batchCapacity);
  return {
    version: 1,
    machine: machine(started),
    command,
    source,
    options: {
      durationS: opts.durationS,
      connections: opts.connections,
      rate: opts.rate,
      workers: opts.workers,
      edges: opts.edges,
      shards: opts.shards,
      ackReplicas: opts.ackReplicas,
      keys: opts.keys,
      quick: opts.quick,
      ceilingS: opts.ceilingS,
      warmupS: opts.warmupS,
      profile: opts.profile,
    },
    settings: stack.settings,
    ...phases,
    figures,
    capacity,
    batchCapacity,
    ...(clickhouseViews ? { clickhouseViews } : {}),
    summary: summarize(figures),
  };
}
