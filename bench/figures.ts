import { batchFigures } from "./batch-figures.js";
import { type Capacity, capacityOf } from "./capacity.js";
import { atLeast, atMost, type Figure, figure, perUnitUs, TARGETS } from "./figure.js";
import type { LoadResult } from "./load-spec.js";
import { otlpFigures } from "./otlp-figures.js";
import type { BatchPhase } from "./phase-batch.js";
import type { EndToEndPhase } from "./phase-e2e.js";
import { MACHINE } from "./proc-stats.js";
import type { PhaseResults } from "./run-results.js";
import { componentCores, issue12Figures, issue36Figures, rawInsertUsPerRow } from "./targets.js";

// Every figure of a run, phase by phase, with its target and ceiling. The table and the JSON's
// `figures` both come from this list, so what is printed is what is checked.

/** CPU per process, the load generator, the whole machine, and what others took from it. */
export function cpuFigures(
  id: string,
  section: string,
  cores: Record<string, number>,
  load: LoadResult | null,
  during = "",
) {
  const suffix = during ? ` (${during})` : "";
  const ours = Object.entries(cores).filter(([name]) => name !== MACHINE);
  const machineCores = cores[MACHINE] ?? 0;
  const generator = load?.generatorCores ?? 0;
  const sum = ours.reduce((a, [, v]) => a + v, 0) + generator;
  const generators = load && load.generators > 1 ? ` ×${load.generators}` : "";
  return [
    ...ours.map(([name, v]) =>
      figure(`${id}.cpu.${name.replace(/\W+/g, "-")}`, section, `CPU ${name}${suffix}`, v, "cores"),
    ),
    ...(load
      ? [
          figure(
            `${id}.cpu.load`,
            section,
            `CPU load generator (${load.generator}${generators})${suffix}`,
            generator,
            "cores",
          ),
        ]
      : []),
    figure(`${id}.cpu.machine`, section, `CPU whole machine${suffix}`, machineCores, "cores"),
    figure(
      `${id}.cpu.others`,
      section,
      `CPU of processes outside the benchmark${suffix}`,
      Math.max(0, Math.round((machineCores - sum) * 100) / 100),
      "cores",
    ),
  ];
}

const nonOk = (p: { load: { statuses: Record<string, number>; errors: number } }) =>
  Object.values(p.load.statuses).reduce((a, b) => a + b, 0) + p.load.errors;

function e2eFigures(section: string, id: string, p: EndToEndPhase): Figure[] {
  return [
    figure(`${id}.p50`, section, "latency p50", p.load.latencyMs.p50, "ms"),
    figure(`${id}.p99`, section, "latency p99", p.load.latencyMs.p99, "ms", {
      targets: [atMost(TARGETS.p99Ms)],
    }),
    figure(`${id}.max`, section, "latency max", p.load.latencyMs.max, "ms"),
    figure(`${id}.non200`, section, "answers other than 200 (incl. errors)", nonOk(p), "count"),
    figure(`${id}.stored`, section, "stored in ClickHouse", p.storedPerSec, "rows/s"),
    figure(`${id}.lag.p50`, section, "end-to-end lag p50", p.lagMs.p50, "ms"),
    figure(`${id}.lag.p99`, section, "end-to-end lag p99", p.lagMs.p99, "ms", {
      targets: [atMost(TARGETS.lagP99Ms)],
    }),
    figure(`${id}.backlog.end`, section, "backlog at end of load", p.backlogEndJobs, "jobs"),
    figure(
      `${id}.backlog.slope`,
      section,
      "backlog trend (2nd half)",
      p.backlogSlopeJobsPerSec,
      "jobs/s",
      {
        targets: [atMost(1)],
      },
    ),
    figure(`${id}.drain.after`, section, "all accepted stored after load stop", p.drainAfterS, "s"),
    figure(
      `${id}.complete`,
      section,
      "every accepted report stored (1 = yes)",
      p.complete ? 1 : 0,
      "",
      {
        targets: [atLeast(1)],
      },
    ),
    ...Object.entries(p.peakRssMb).map(([name, v]) =>
      figure(`${id}.rss.${name.replace(/\s+/g, "-")}`, section, `peak RSS ${name}`, v, "MB"),
    ),
    figure(
      `${id}.reportsPerJob`,
      section,
      "reports per job",
      p.enqueued / Math.max(1, p.jobs),
      "reports",
    ),
    figure(
      `${id}.cpuPerReport`,
      section,
      "edge CPU per report",
      perUnitUs(componentCores(p.cpuCores, "edge"), p.load.okPerSec),
      "µs",
    ),
    ...cpuFigures(id, section, p.cpuCores, p.load),
  ];
}

/** Phase 2b's capacity table, when its reports were stored. */
export const batchCapacityOf = (b: BatchPhase): Capacity | null =>
  b.cpuSecondsToStored
    ? capacityOf({ cpuSecondsToStored: b.cpuSecondsToStored, enqueued: b.reports, load: b.load })
    : null;

export function buildFigures(
  r: PhaseResults,
  capacity: Capacity = capacityOf(r.saturation),
  batchCapacity: Capacity | null = batchCapacityOf(r.edgeBatch),
): Figure[] {
  const bare = r.ceilings.bareFastify;
  const bareCeiling = { label: "bare Fastify", value: bare.load.okPerSec };
  const insertCeiling = {
    label: "raw ClickHouse RowBinary insert",
    value: r.ceilings.clickhouse.rowsPerSec,
  };
  const e = r.edgeAlone;
  const d = r.drain;
  const s = r.saturation;
  const f = r.fixedRate;
  const bareUs = perUnitUs(bare.cpuCores["bare Fastify"], bare.load.okPerSec);
  const edgeUs = perUnitUs(componentCores(e.cpuCores, "edge"), e.load.okPerSec);
  const reportsPerJob = e.enqueued / Math.max(1, e.jobs);
  const C = "1 ceilings";
  const E = "2 edge alone (no workers), saturated";
  const D = `3 worker drain of the edge's backlog`;
  const S = "4a end to end, saturated";
  const F = `4b end to end, fixed rate ${f.requestedRate}/s`;
  return [
    figure("ceiling.bare", C, "bare Fastify, same POST and load", bare.load.okPerSec, "req/s"),
    figure("ceiling.bare.p99", C, "bare Fastify latency p99", bare.load.latencyMs.p99, "ms"),
    figure("ceiling.bare.cpuPerRequest", C, "bare Fastify CPU per request", bareUs, "µs"),
    ...cpuFigures("ceiling.bare", C, bare.cpuCores, bare.load, "bare Fastify run"),
    figure(
      "ceiling.bullmq",
      C,
      `raw BullMQ addBulk, ${r.ceilings.bullmq.reportsPerJob} reports/job`,
      r.ceilings.bullmq.reportsPerSec,
      "reports/s",
    ),
    figure(
      "ceiling.bullmq.bytes",
      C,
      `Redis bytes/report, ${r.ceilings.bullmq.reportsPerJob} reports/job`,
      r.ceilings.bullmq.redisBytesPerReport,
      "B",
    ),
    figure(
      "ceiling.clickhouse",
      C,
      `raw ClickHouse RowBinary insert, ${r.ceilings.clickhouse.rowsPerInsert} rows/insert`,
      r.ceilings.clickhouse.rowsPerSec,
      "rows/s",
    ),
    figure(
      "ceiling.clickhouse.cpuPerRow",
      C,
      "raw insert CPU per row (ClickHouse server + insert client)",
      rawInsertUsPerRow(r.ceilings.clickhouse),
      "µs",
    ),
    ...cpuFigures("ceiling.clickhouse", C, r.ceilings.clickhouse.cpuCores, null, "raw insert run"),

    figure("edge.accepted", E, "accepted", e.load.okPerSec, "reports/s", {
      targets: [atLeast(TARGETS.edgeVsBare, "ratio")],
      ceiling: bareCeiling,
    }),
    figure("edge.p50", E, "latency p50", e.load.latencyMs.p50, "ms"),
    figure("edge.p99", E, "latency p99", e.load.latencyMs.p99, "ms"),
    figure("edge.max", E, "latency max", e.load.latencyMs.max, "ms"),
    figure("edge.non200", E, "answers other than 200 (incl. errors)", nonOk(e), "count"),
    figure("edge.rss", E, "edge peak RSS", e.edgePeakRssMb, "MB", {
      ceiling: { label: "bare Fastify's, same load", value: bare.serverPeakRssMb },
    }),
    figure("edge.redis.bytes", E, "Redis bytes per queued report", e.redisBytesPerReport, "B"),
    figure("edge.reportsPerJob", E, "reports per job", reportsPerJob, "reports"),
    figure("edge.cpuPerReport", E, "edge CPU per report", edgeUs, "µs", {
      ceiling: { label: "bare Fastify per request", value: bareUs },
    }),
    figure("edge.vs.bullmq", E, "accepted vs raw BullMQ addBulk", e.load.okPerSec, "reports/s", {
      ceiling: { label: "raw BullMQ addBulk", value: r.ceilings.bullmq.reportsPerSec },
    }),
    ...cpuFigures("edge", E, e.cpuCores, e.load),
    ...batchFigures(r.edgeBatch, bareUs, cpuFigures),
    ...(r.edgeOtlp ? otlpFigures(r.edgeOtlp, r.edgeBatch, bareUs, cpuFigures) : []),

    figure(
      "drain.rowsPerSec",
      D,
      `drain with ${d.workerPeakRssMb.length} worker(s)`,
      d.rowsPerSec,
      "rows/s",
      { targets: [atLeast(TARGETS.drainRowsPerSec)], ceiling: insertCeiling },
    ),
    figure("drain.rows", D, "rows drained", d.rows, "rows"),
    figure("drain.complete", D, "every accepted report stored (1 = yes)", d.complete ? 1 : 0, "", {
      targets: [atLeast(1)],
    }),
    figure("drain.rowsPerInsert", D, "rows per insert", d.rowsPerInsert, "rows"),
    figure("drain.insertMs", D, "time per insert", d.insertMs, "ms"),
    figure(
      "drain.workerCpuPerRow",
      D,
      "worker CPU per row",
      perUnitUs(
        Object.entries(d.cpuCores)
          .filter(([n]) => n.startsWith("worker"))
          .reduce((a, [, v]) => a + v, 0),
        d.rowsPerSec,
      ),
      "µs",
    ),
    figure(
      "drain.clickhouseCpuPerRow",
      D,
      "ClickHouse CPU per row",
      perUnitUs(d.cpuCores.clickhouse, d.rowsPerSec),
      "µs",
      {
        ceiling: {
          label: "raw insert",
          value: perUnitUs(
            r.ceilings.clickhouse.cpuCores["clickhouse (raw insert)"],
            r.ceilings.clickhouse.rowsPerSec,
          ),
        },
      },
    ),
    ...d.workerPeakRssMb.map((v, i) =>
      figure(`drain.rss.worker-${i + 1}`, D, `peak RSS worker ${i + 1}`, v, "MB"),
    ),
    ...cpuFigures("drain", D, d.cpuCores, null),

    figure("sat.sustained", S, "sustained end to end", s.sustainedPerSec, "reports/s", {
      targets: [atLeast(TARGETS.sustainedPerSec)],
      ceiling: bareCeiling,
    }),
    figure("sat.accepted", S, "accepted", s.load.okPerSec, "reports/s", { ceiling: bareCeiling }),
    ...e2eFigures(S, "sat", s),

    figure("rate.accepted", F, "accepted", f.load.okPerSec, "reports/s", {
      targets: [atLeast(0.98, "ratio")],
      ceiling: { label: "requested rate", value: f.requestedRate },
    }),
    figure("rate.sustained", F, "sustained end to end", f.sustainedPerSec, "reports/s", {
      ceiling: { label: "requested rate", value: f.requestedRate },
    }),
    figure(
      "rate.unsent",
      F,
      "requests the generator could not send in time",
      f.load.unsent,
      "count",
    ),
    ...e2eFigures(F, "rate", f),
    ...issue12Figures(r, capacity),
    ...issue36Figures(r, capacity, batchCapacity),
  ];
}
