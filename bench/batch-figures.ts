import { componentOf } from "./capacity.js";
import { atMost, type Figure, figure, perUnitUs } from "./figure.js";
import type { BatchPhase } from "./phase-batch.js";

// Phase 2b's figures, and issue 22's target for it: what a report costs the edge inside a batch,
// next to what a bare Fastify request costs.

/** Edge CPU per report in batches of 100 ÷ bare Fastify CPU per request. */
export const BATCH_EDGE_CPU_VS_BARE = 0.15;

const nonOk = (p: BatchPhase) =>
  Object.values(p.load.statuses).reduce((a, b) => a + b, 0) + p.load.errors;

export const batchEdgeUs = (b: BatchPhase) =>
  perUnitUs(
    Object.entries(b.cpuCores)
      .filter(([name]) => componentOf(name) === "edge")
      .reduce((a, [, v]) => a + v, 0),
    b.reportsPerSec,
    // A few µs a report: whole µs would move the ratio to bare by a tenth.
    1,
  );

/** The phase's own section; `cpu` makes its CPU rows (figures.ts's, shared by every phase). */
export function batchFigures(
  b: BatchPhase,
  bareUs: number,
  cpu: (
    id: string,
    section: string,
    cores: Record<string, number>,
    load: BatchPhase["load"],
  ) => Figure[],
): Figure[] {
  const B = `2b edge alone (no workers), saturated with batches of ${b.batchSize} (POST /api/reports)`;
  return [
    figure("batch.accepted", B, "accepted", b.reportsPerSec, "reports/s"),
    figure("batch.requests", B, "requests answered", b.load.okPerSec, "req/s"),
    figure("batch.p50", B, "latency p50 (per request)", b.load.latencyMs.p50, "ms"),
    figure("batch.p99", B, "latency p99 (per request)", b.load.latencyMs.p99, "ms"),
    figure("batch.non200", B, "answers other than 200 (incl. errors)", nonOk(b), "count"),
    figure("batch.rss", B, "edge peak RSS", b.edgePeakRssMb, "MB"),
    figure("batch.reportsPerJob", B, "reports per job", b.reports / Math.max(1, b.jobs), "reports"),
    figure("batch.cpuPerReport", B, "edge CPU per report", batchEdgeUs(b), "µs", {
      ceiling: { label: "bare Fastify per request", value: bareUs },
    }),
    ...cpu("batch", B, b.cpuCores, b.load),
  ];
}

/** Issue 22's batch target, for the targets section. */
export function batchTargetFigure(b: BatchPhase, section: string, bareUs: number): Figure {
  return figure(
    "target.batchEdgeCpu",
    section,
    `edge CPU per report in batches of ${b.batchSize} ÷ bare Fastify CPU per request`,
    batchEdgeUs(b),
    "µs",
    {
      targets: [atMost(BATCH_EDGE_CPU_VS_BARE, "ratio")],
      ceiling: { label: "bare Fastify per request", value: bareUs },
    },
  );
}
