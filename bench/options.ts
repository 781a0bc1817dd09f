import { resolve } from "node:path";
import { parseArgs } from "node:util";

// Command-line options of `npm run bench`. `--quick` shortens every phase so that a whole run
// stays under a minute on a 2-core machine (the smoke test uses it); explicit options still win.

export interface BenchOptions {
  /** Seconds per load phase. */
  durationS: number;
  /** Concurrent connections of the load generator. */
  connections: number;
  /** Reports per second of the fixed-rate end-to-end phase. */
  rate: number;
  /** Worker processes. */
  workers: number;
  /** Edge processes, each on its own port with a load generator of its own. */
  edges: number;
  /** QUEUE_SHARDS for edges and workers; null: not set (the service's default). */
  shards: number | null;
  /** Replica redis-servers of the benchmark's Redis; REDIS_ACK_REPLICAS for the edges when > 0. */
  ackReplicas: number;
  /** Project keys (each its own project, on the unlimited plan). */
  keys: number;
  quick: boolean;
  /** Seconds per ceiling measurement (BullMQ, ClickHouse); Fastify uses `durationS`. */
  ceilingS: number;
  /** Seconds of unmeasured load on a freshly started server (bare Fastify, edge) first. */
  warmupS: number;
  /** Longest wait for ClickHouse to hold every accepted report, per phase. */
  drainTimeoutS: number;
  /** Where latest.json, latest.md and the timestamped copies go (ignored by git by default). */
  outDir: string;
  /** Also write this run as the published reference, `bench/results/latest.{json,md}`. */
  publishDir: string | null;
  /** Run edge and workers with `--cpu-prof`; profiles go to `<outDir>/profiles`. */
  profile: boolean;
  /** "clickhouse": only the views' cost (phase-views.ts), on a ClickHouse server of its own. */
  only: "clickhouse" | null;
}

export const USAGE = `npm run bench -- [options]
  --duration S      seconds per load phase (default 15; 3 with --quick)
  --connections N   load generator connections (default 512)
  --rate R          fixed-rate phase, reports/s (default 10000; 3000 with --quick)
  --workers N       worker processes (default 1)
  --edges N         edge processes on their own ports, one wrk per edge (default 1)
  --shards S        QUEUE_SHARDS=S for edges and workers (default: not set)
  --ack-replicas N  start N replicas of the benchmark's Redis, REDIS_ACK_REPLICAS=N for the
                    edges (default 0: no replicas)
  --keys N          project keys on the unlimited plan (default 20)
  --quick           whole run under a minute: short phases, smaller backlog
  --out DIR         results directory (default bench/runs, ignored by git)
  --publish         also make this run the published reference (bench/results/latest.*,
                    tracked): for a deliberate reference run, then commit it
  --profile         CPU profiles of the edge and workers (node --cpu-prof) in DIR/profiles
  --only clickhouse only ClickHouse's CPU per report with every view ÷ \`reports\` alone, and
                    each view's part (no edge, Redis or worker; writes views-latest.*)
  --help            this text
Headroom settings (ENQUEUE_MAX_WAIT_MS, BATCH_MAX_ROWS, WORKER_CONCURRENCY, ...) are read from
the environment and passed to the edge and the workers; the results record them.`;

/** Every run's results: ignored by git, so a benchmark leaves the checkout clean. */
export const DEFAULT_OUT_DIR = "bench/runs";
/** The reference run docs/benchmarks.md and bench/README.md quote, tracked: written only with `--publish`. */
export const PUBLISHED_DIR = "bench/results";

/** The command a run was made with, as it would be typed again. */
export const commandLine = (script: string, argv: string[]) =>
  `npm run ${script}${argv.length ? ` -- ${argv.join(" ")}` : ""}`;

export class OptionsError extends Error {
  override name = "OptionsError";
}

function integer(
  name: string,
  text: string | undefined,
  fallback: number,
  min: number,
  max: number,
) {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === "" || !Number.isInteger(n) || n < min || n > max) {
    throw new OptionsError(`--${name} must be an integer from ${min} to ${max} (got ${text})`);
  }
  return n;
}

export const positiveInt = (
  name: string,
  text: string | undefined,
  fallback: number,
  max: number,
) => integer(name, text, fallback, 1, max);

/** Parses argv (without node and the script); `null` when help was asked for. */
export function parseBenchOptions(argv: string[], cwd = process.cwd()): BenchOptions | null {
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(argv).values;
  } catch (err) {
    throw new OptionsError((err as Error).message);
  }
  if (values.help) return null;
  const quick = values.quick ?? false;
  const durationS = positiveInt("duration", values.duration, quick ? 3 : 15, 3_600);
  // Enough clients at once that the edge saturates as a busy one does: jobs grow with load
  // (group commit), which 64 connections cap at 64 reports.
  const connections = positiveInt("connections", values.connections, 512, 10_000);
  const edges = positiveInt("edges", values.edges, 1, 64);
  if (connections < edges) {
    throw new OptionsError(`--connections (${connections}) must be at least --edges (${edges})`);
  }
  return {
    durationS,
    connections,
    rate: positiveInt("rate", values.rate, quick ? 3_000 : 10_000, 1_000_000),
    workers: positiveInt("workers", values.workers, 1, 64),
    edges,
    shards: values.shards === undefined ? null : positiveInt("shards", values.shards, 1, 256),
    ackReplicas: integer("ack-replicas", values["ack-replicas"], 0, 0, 8),
    keys: positiveInt("keys", values.keys, 20, 10_000),
    quick,
    ceilingS: quick ? 1 : Math.min(durationS, 10),
    warmupS: quick ? 1 : 3,
    drainTimeoutS: quick ? 30 : 180,
    outDir: resolve(cwd, values.out ?? DEFAULT_OUT_DIR),
    publishDir: values.publish ? resolve(cwd, PUBLISHED_DIR) : null,
    profile: values.profile ?? false,
    only: onlyOf(values.only),
  };
}

function onlyOf(text: string | undefined): BenchOptions["only"] {
  if (text === undefined) return null;
  if (text === "clickhouse") return text;
  throw new OptionsError(`--only must be clickhouse (got ${text})`);
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      duration: { type: "string" },
      connections: { type: "string" },
      rate: { type: "string" },
      workers: { type: "string" },
      edges: { type: "string" },
      shards: { type: "string" },
      "ack-replicas": { type: "string" },
      keys: { type: "string" },
      quick: { type: "boolean" },
      out: { type: "string" },
      publish: { type: "boolean" },
      profile: { type: "boolean" },
      only: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}
