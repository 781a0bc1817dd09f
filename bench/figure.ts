// One figure of a run: its value, its targets, and its ratio to the ceiling measured on the same
// machine in the same run. Values are always finite numbers (a missing one reads 0), so the JSON
// and the table never carry NaN.

export interface Target {
  /** "value": the figure itself; "ratio": the figure divided by its ceiling. */
  on: "value" | "ratio";
  op: ">=" | "<=";
  value: number;
}

export interface Figure {
  id: string;
  section: string;
  label: string;
  value: number;
  unit: string;
  targets: Target[];
  ceiling: { label: string; value: number } | null;
  /** value / ceiling, when there is a ceiling. */
  ratio: number | null;
  /** Whether every target is met; null without targets; false when invalid. */
  met: boolean | null;
  /** Why the value is no result (e.g. "17 of 17 answers were 400"); null when it is one. */
  invalid: string | null;
}

/** Targets for 2 cores with the load generator on the same machine. */
export const TARGETS = {
  sustainedPerSec: 25_000,
  p99Ms: 25,
  lagP99Ms: 2_000,
  edgeVsBare: 0.6,
  drainRowsPerSec: 100_000,
};

/** Issue 12's targets: ratios to what the same run measured, and two absolute figures. */
export const ISSUE_12 = {
  /** Edge CPU per report ÷ bare Fastify CPU per request. */
  edgeCpuVsBare: 1.3,
  /** Reports per job at saturation. */
  reportsPerJob: 200,
  /** Worker drain ÷ raw ClickHouse insert. */
  drainVsInsert: 0.9,
  /** Whole pipeline CPU per report ÷ (bare request + raw insert row). */
  pipelineCpuVsBare: 1.6,
  /** End-to-end sustained ÷ edge alone accepted. */
  sustainedVsEdge: 0.95,
  edgeRssMb: 100,
  redisBytesPerReport: 300,
};

/**
 * Issue 36's targets (a leaner pipeline), each a ratio to what the same run measured, or a bound.
 * `npm run bench` measures the pipeline's, `npm run bench:edge` the edge's, `npm run bench:read`
 * /api/v1/headroom's; the drain and end-to-end ones are issue 12's figures (ISSUE_12).
 */
export const ISSUE_36 = {
  /** Edge CPU per single report ÷ bare Fastify CPU per request, any generator and concurrency. */
  edgeCpuVsBare: 1.3,
  /** Edge CPU per report in batches of 100 ÷ bare Fastify CPU per request. */
  batchEdgeCpuVsBare: 0.1,
  /** Edge peak RSS at saturation, single reports and batches. */
  edgeRssMb: 120,
  batchEdgeRssMb: 150,
  /** CPU per report of every process (edge, Redis, worker, ClickHouse) ÷ bare per request. */
  pipelineCpuVsBare: 1.5,
  batchPipelineCpuVsBare: 0.5,
  /** /api/v1/headroom CPU per answer ÷ a bare Fastify route sending the same bytes (issue 48: 1.3). */
  headroomCpuVsBare: 1.3,
  /** /api/v1/headroom p99 with 50 dashboards polling while ingest runs (a core of its own). */
  headroomP99Ms: 50,
};

export const atLeast = (value: number, on: Target["on"] = "value"): Target => ({
  on,
  op: ">=",
  value,
});
export const atMost = (value: number, on: Target["on"] = "value"): Target => ({
  on,
  op: "<=",
  value,
});

const finite = (n: number | null | undefined) =>
  typeof n === "number" && Number.isFinite(n) ? n : 0;
const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

function meets(t: Target, value: number, ratio: number | null): boolean {
  const x = t.on === "ratio" ? ratio : value;
  if (x === null) return false;
  return t.op === ">=" ? x >= t.value : x <= t.value;
}

export function figure(
  id: string,
  section: string,
  label: string,
  value: number | null | undefined,
  unit: string,
  opts: {
    targets?: Target[];
    ceiling?: { label: string; value: number };
    /** The value measured something that failed (failedNote): never met, and said so. */
    invalid?: string | null;
  } = {},
): Figure {
  const v = finite(value);
  const targets = opts.targets ?? [];
  const ceiling = opts.ceiling
    ? { label: opts.ceiling.label, value: finite(opts.ceiling.value) }
    : null;
  const ratio = ceiling ? (ceiling.value > 0 ? round(v / ceiling.value, 3) : 0) : null;
  const invalid = opts.invalid ?? null;
  return {
    id,
    section,
    label,
    value: v,
    unit,
    targets,
    ceiling,
    ratio,
    met: targets.length ? invalid === null && targets.every((t) => meets(t, v, ratio)) : null,
    invalid,
  };
}

/** CPU microseconds per unit of work: steadier than rates when other work shares the cores. */
export const perUnitUs = (cores: number | undefined, perSec: number, decimals = 0) =>
  perSec > 0 ? round(((cores ?? 0) * 1e6) / perSec, decimals) : 0;

export function summarize(figures: Figure[]) {
  const withTargets = figures.filter((f) => f.met !== null);
  return {
    targets: withTargets.length,
    met: withTargets.filter((f) => f.met).length,
    invalid: figures.filter((f) => f.invalid !== null).length,
  };
}
