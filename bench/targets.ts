import { batchTargetFigure } from "./batch-figures.js";
import { type Capacity, componentOf } from "./capacity.js";
import type { InsertCeiling } from "./ceilings.js";
import { atLeast, atMost, type Figure, figure, ISSUE_12, ISSUE_36, perUnitUs } from "./figure.js";
import type { PhaseResults } from "./run-results.js";

// Issue 12's and issue 36's targets as figures of their own sections: each a ratio of two things
// the same run measured (or a figure with its bound), so that a run on any machine says which are
// met.

/** Cores of every process of one component (the edges, the workers), summed. */
export const componentCores = (cores: Record<string, number>, component: string) =>
  Object.entries(cores)
    .filter(([name]) => componentOf(name) === component)
    .reduce((a, [, v]) => a + v, 0);

/** CPU per row of the raw insert: the ClickHouse server's and the insert client's. */
export const rawInsertUsPerRow = (c: InsertCeiling) =>
  c.rows > 0
    ? Math.round(
        (((c.cpuSeconds["clickhouse (raw insert)"] ?? 0) +
          (c.cpuSeconds["benchmark process"] ?? 0)) *
          1e7) /
          c.rows,
      ) / 10
    : 0;

/** Issue 12's targets, each as a ratio (or figure) measured in this run. */
export function issue12Figures(r: PhaseResults, capacity: Capacity): Figure[] {
  const T = "5 issue 12 targets (ratios within this run)";
  const bare = r.ceilings.bareFastify;
  const e = r.edgeAlone;
  const bareUs = perUnitUs(bare.cpuCores["bare Fastify"], bare.load.okPerSec);
  const rawRowUs = rawInsertUsPerRow(r.ceilings.clickhouse);
  const edgeRssAtSaturation = Math.max(
    e.edgePeakRssMb,
    ...Object.entries(r.saturation.peakRssMb)
      .filter(([name]) => componentOf(name) === "edge")
      .map(([, v]) => v),
  );
  return [
    figure(
      "target.edgeCpu",
      T,
      "edge CPU per report ÷ bare Fastify CPU per request (edge alone)",
      perUnitUs(componentCores(e.cpuCores, "edge"), e.load.okPerSec),
      "µs",
      {
        targets: [atMost(ISSUE_12.edgeCpuVsBare, "ratio")],
        ceiling: { label: "bare Fastify per request", value: bareUs },
      },
    ),
    figure(
      "target.reportsPerJob",
      T,
      "reports per job at saturation (edge alone)",
      e.enqueued / Math.max(1, e.jobs),
      "reports",
      { targets: [atLeast(ISSUE_12.reportsPerJob)] },
    ),
    figure(
      "target.drain",
      T,
      "worker drain ÷ raw ClickHouse insert",
      r.drain.rowsPerSec,
      "rows/s",
      {
        targets: [atLeast(ISSUE_12.drainVsInsert, "ratio")],
        ceiling: { label: "raw ClickHouse insert", value: r.ceilings.clickhouse.rowsPerSec },
      },
    ),
    figure(
      "target.pipelineCpu",
      T,
      "whole pipeline CPU per report ÷ (bare request + raw insert row)",
      capacity.pipeline.usPerReport,
      "µs",
      {
        targets: [atMost(ISSUE_12.pipelineCpuVsBare, "ratio")],
        ceiling: {
          label: `bare request ${bareUs} + raw insert row ${rawRowUs}`,
          value: bareUs + rawRowUs,
        },
      },
    ),
    figure(
      "target.sustained",
      T,
      "end-to-end sustained ÷ edge alone accepted",
      r.saturation.sustainedPerSec,
      "reports/s",
      {
        targets: [atLeast(ISSUE_12.sustainedVsEdge, "ratio")],
        ceiling: { label: "edge alone accepted", value: e.load.okPerSec },
      },
    ),
    batchTargetFigure(r.edgeBatch, T, bareUs),
    figure("target.edgeRss", T, "edge peak RSS at saturation", edgeRssAtSaturation, "MB", {
      targets: [atMost(ISSUE_12.edgeRssMb)],
    }),
    figure("target.redisBytes", T, "Redis bytes per queued report", e.redisBytesPerReport, "B", {
      targets: [atMost(ISSUE_12.redisBytesPerReport)],
    }),
  ];
}

/**
 * Issue 36's pipeline rows: every process's CPU per report (the capacity tables' whole pipeline),
 * single and in batches, ÷ bare Fastify CPU per request. Its edge rows are `npm run bench:edge`'s;
 * its drain and end-to-end rows are issue 12's (target.drain, target.sustained), with the same
 * bounds.
 */
export function issue36Figures(
  r: PhaseResults,
  capacity: Capacity,
  batchCapacity: Capacity | null,
): Figure[] {
  const T = "6 issue 36 targets (ratios within this run; the edge's: npm run bench:edge)";
  const bare = r.ceilings.bareFastify;
  const ceiling = {
    label: "bare Fastify per request",
    value: perUnitUs(bare.cpuCores["bare Fastify"], bare.load.okPerSec),
  };
  return [
    figure(
      "target36.pipelineCpu",
      T,
      "pipeline CPU per report, every process (end to end, saturated) ÷ bare per request",
      capacity.pipeline.usPerReport,
      "µs",
      { targets: [atMost(ISSUE_36.pipelineCpuVsBare, "ratio")], ceiling },
    ),
    figure(
      "target36.batchPipelineCpu",
      T,
      `pipeline CPU per report in batches of ${r.edgeBatch.batchSize}, every process (phase 2b until stored) ÷ bare per request`,
      batchCapacity?.pipeline.usPerReport ?? 0,
      "µs",
      // Unmeasured (batches dropped, not stored) is not met: no target then.
      { targets: batchCapacity ? [atMost(ISSUE_36.batchPipelineCpuVsBare, "ratio")] : [], ceiling },
    ),
    figure(
      "target36.batchStored",
      T,
      "phase 2b: every accepted report stored (1 = yes)",
      r.edgeBatch.stored ? 1 : 0,
      "",
      { targets: [atLeast(1)] },
    ),
  ];
}
