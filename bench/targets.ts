import { batchTargetFigure } from "./batch-figures.js";
import { type Capacity, componentOf } from "./capacity.js";
import type { InsertCeiling } from "./ceilings.js";
import { atLeast, atMost, type Figure, figure, ISSUE_12, perUnitUs } from "./figure.js";
import type { PhaseResults } from "./figures.js";

// Issue 12's targets as figures of their own section: each a ratio of two things the same run
// measured (or a figure with its bound), so that a run on any machine says which are met.

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
