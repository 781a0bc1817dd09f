import { describe, expect, it } from "vitest";
import { capacityOf, componentOf } from "../../bench/capacity.js";
import { figure, summarize } from "../../bench/figure.js";
import { batchCapacityOf, buildFigures } from "../../bench/figures.js";
import type { LoadResult } from "../../bench/load-spec.js";
import type { EndToEndPhase } from "../../bench/phase-e2e.js";
import { renderMarkdown } from "../../bench/render.js";
import type { PhaseResults } from "../../bench/run-results.js";

const load = (okPerSec: number, p99 = 10): LoadResult => ({
  mode: "saturate",
  durationS: 10,
  startedAt: 1_700_000_000_000,
  sent: okPerSec * 10,
  ok: okPerSec * 10,
  okPerSec,
  statuses: { "503": 3 },
  errors: 1,
  latencyMs: { p50: 2, p90: 5, p99, max: 40, mean: 3 },
  unsent: 0,
  generatorCores: 0.8,
  generatorCpuS: 8,
  generator: "wrk",
  generators: 1,
});

const e2e = (okPerSec: number): EndToEndPhase => ({
  load: load(okPerSec, 30),
  enqueued: okPerSec * 10,
  storedPerSec: okPerSec - 100,
  sustainedPerSec: okPerSec - 100,
  lagMs: { p50: 500, p99: 1_500, max: 1_900 },
  backlogEndJobs: 2,
  backlogSlopeJobsPerSec: 0.1,
  backlogGrowing: false,
  drainAfterS: 1.2,
  complete: true,
  peakRssMb: { edge: 150, "worker 1": 120, clickhouse: 400, redis: 30 },
  cpuCores: { edge: 0.9, "worker 1": 0.3, clickhouse: 0.2, redis: 0.2 },
  // 10 s of load and 2 s of drain: 12 s in all.
  cpuSecondsToStored: { edge: 9, "worker 1": 3.6, clickhouse: 2.4, redis: 2.4, machine: 24 },
  jobs: okPerSec / 10,
});

const phases: PhaseResults = {
  ceilings: {
    bareFastify: {
      load: load(20_000),
      cpuCores: { "bare Fastify": 1, machine: 2 },
      serverPeakRssMb: 80,
    },
    bullmq: {
      reportsPerSec: 300_000,
      reports: 900_000,
      reportsPerJob: 500,
      inFlight: 8,
      redisBytesPerReport: 230,
    },
    clickhouse: {
      rowsPerSec: 200_000,
      rows: 1_000_000,
      rowsPerInsert: 10_000,
      inserts: 100,
      cpuCores: { "clickhouse (raw insert)": 1, "benchmark process": 0.3, machine: 1.5 },
      cpuSeconds: { "clickhouse (raw insert)": 4, "benchmark process": 1, machine: 6 },
    },
  },
  edgeAlone: {
    load: load(15_000),
    enqueued: 150_000,
    jobs: 1_500,
    edgePeakRssMb: 180,
    edgesPeakRssMb: { edge: 180 },
    redisBytesPerReport: 300,
    redisUsedMb: 50,
    cpuCores: { edge: 1, redis: 0.2 },
  },
  edgeBatch: {
    batchSize: 100,
    load: load(300),
    reports: 300_000,
    reportsPerSec: 30_000,
    jobs: 600,
    edgePeakRssMb: 120,
    cpuCores: { edge: 0.24, redis: 0.1 },
    // Stored by the workers: 6 s of CPU for 300,000 reports in all.
    cpuSecondsToStored: { edge: 2.4, redis: 1, "worker 1": 1.5, clickhouse: 1.1, machine: 8 },
    stored: true,
  },
  edgeOtlp: {
    batchSize: 50,
    spansPerExport: 100,
    bodyBytes: 43_631,
    duplicates: 0,
    load: load(100),
    reports: 50_000,
    reportsPerSec: 5_000,
    jobs: 100,
    edgePeakRssMb: 130,
    cpuCores: { edge: 0.06, redis: 0.05 },
    cpuSecondsToStored: null,
    stored: null,
  },
  drain: {
    rows: 150_000,
    seconds: 1.2,
    rowsPerSec: 125_000,
    complete: true,
    rowsPerInsert: 20_000,
    insertMs: 100,
    cpuCores: { "worker 1": 0.5, clickhouse: 0.9, redis: 0.1 },
    workerPeakRssMb: [140],
  },
  saturation: e2e(12_000),
  fixedRate: { ...e2e(10_000), requestedRate: 10_000 },
};

describe("bench figures", () => {
  it("computes ratios to the ceiling and checks value and ratio targets", () => {
    const f = figure("x", "s", "drain", 80_000, "rows/s", {
      targets: [
        { on: "value", op: ">=", value: 100_000 },
        { on: "ratio", op: ">=", value: 0.7 },
      ],
      ceiling: { label: "raw insert", value: 100_000 },
    });
    expect(f.ratio).toBe(0.8);
    expect(f.met).toBe(false);
    expect(
      figure("y", "s", "rss", 150, "MB", { targets: [{ on: "value", op: "<=", value: 200 }] }).met,
    ).toBe(true);
    expect(figure("z", "s", "info", Number.NaN, "ms")).toMatchObject({
      value: 0,
      met: null,
      ratio: null,
    });
    expect(
      figure("c", "s", "zero ceiling", 5, "x", { ceiling: { label: "c", value: 0 } }).ratio,
    ).toBe(0);
  });

  it("gives every figure a finite value, a ratio where there is a ceiling, and unique ids", () => {
    const figures = buildFigures(phases);
    expect(new Set(figures.map((f) => f.id)).size).toBe(figures.length);
    for (const f of figures) {
      expect(Number.isFinite(f.value), f.id).toBe(true);
      if (f.ceiling) expect(Number.isFinite(f.ratio), f.id).toBe(true);
      else expect(f.ratio, f.id).toBeNull();
    }
    const byId = new Map(figures.map((f) => [f.id, f]));
    expect(byId.get("edge.accepted")).toMatchObject({ ratio: 0.75, met: true });
    expect(byId.get("drain.rowsPerSec")).toMatchObject({ ratio: 0.625, met: true });
    expect(byId.get("sat.sustained")?.met).toBe(false);
    expect(byId.get("edge.non200")?.value).toBe(4);
    expect(byId.get("rate.accepted")?.ratio).toBe(1);
    // Whole machine 2 cores, bare server 1 and generator 0.8: 0.2 went to other processes.
    expect(byId.get("ceiling.bare.cpu.others")?.value).toBe(0.2);
    const s = summarize(figures);
    expect(s.targets).toBe(figures.filter((f) => f.targets.length > 0).length);
    expect(s.met).toBeLessThan(s.targets);
  });

  it("shows each issue 12 target as a ratio measured in the run", () => {
    const byId = new Map(buildFigures(phases).map((f) => [f.id, f]));
    // Edge alone: 1 core at 15,000/s = 67 µs; bare: 1 core at 20,000/s = 50 µs.
    expect(byId.get("target.edgeCpu")).toMatchObject({ value: 67, ratio: 1.34, met: false });
    expect(byId.get("target.reportsPerJob")).toMatchObject({ value: 100, met: false });
    expect(byId.get("target.drain")).toMatchObject({ ratio: 0.625, met: false });
    // Pipeline 145 µs per report vs 50 µs bare + (4 + 1) s over 1,000,000 rows = 5 µs raw insert.
    expect(byId.get("target.pipelineCpu")).toMatchObject({
      value: 145,
      ceiling: { value: 55 },
      ratio: 2.636,
      met: false,
    });
    expect(byId.get("target.sustained")).toMatchObject({ value: 11_900, ratio: 0.793 });
    // The highest edge peak, edge alone (180) or end to end (150).
    expect(byId.get("target.edgeRss")).toMatchObject({ value: 180, met: false });
    // The edge alone's peak beside bare Fastify's under the same load (80 MB).
    expect(byId.get("edge.rss")).toMatchObject({ value: 180, ceiling: { value: 80 }, ratio: 2.25 });
    expect(byId.get("target.redisBytes")).toMatchObject({ value: 300, met: true });
    // Batches: 0.24 cores at 30,000 reports/s = 8 µs a report, 0.16 of the bare request's 50.
    expect(byId.get("batch.cpuPerReport")).toMatchObject({ value: 8, ratio: 0.16 });
    expect(byId.get("batch.reportsPerJob")?.value).toBe(500);
    expect(byId.get("target.batchEdgeCpu")).toMatchObject({ value: 8, ratio: 0.16, met: false });

    const lean = buildFigures({
      ...phases,
      edgeAlone: { ...phases.edgeAlone, cpuCores: { edge: 0.9, redis: 0.2 }, jobs: 500 },
    });
    const leanById = new Map(lean.map((f) => [f.id, f]));
    expect(leanById.get("target.edgeCpu")).toMatchObject({ value: 60, ratio: 1.2, met: true });
    expect(leanById.get("target.reportsPerJob")).toMatchObject({ value: 300, met: true });
    const leanBatch = buildFigures({
      ...phases,
      edgeBatch: { ...phases.edgeBatch, cpuCores: { "edge 1": 0.1, "edge 2": 0.1, redis: 0.1 } },
    });
    // 0.2 cores at 30,000 reports/s: 6.7 µs (to a tenth: a few µs a report).
    expect(leanBatch.find((f) => f.id === "target.batchEdgeCpu")).toMatchObject({
      value: 6.7,
      ratio: 0.134,
      met: true,
    });
  });

  it("shows issue 47's OTLP row: edge CPU per provider span ÷ bare, and ÷ a batched report (≤ 1.5×)", () => {
    const byId = new Map(buildFigures(phases).map((f) => [f.id, f]));
    // 0.06 cores at 5,000 provider spans/s = 12 µs; bare 50 µs; a batched report 8 µs.
    expect(byId.get("otlp.cpuPerSpan")).toMatchObject({ value: 12, ratio: 0.24 });
    expect(byId.get("target47.otlpEdgeCpu")).toMatchObject({ value: 12, ratio: 1.5, met: true });
    expect(byId.get("otlp.duplicates")).toMatchObject({ value: 0, met: true });
    const slow = buildFigures({
      ...phases,
      edgeOtlp: {
        ...(phases.edgeOtlp as NonNullable<PhaseResults["edgeOtlp"]>),
        cpuCores: { edge: 0.061 },
      },
    });
    expect(slow.find((f) => f.id === "target47.otlpEdgeCpu")).toMatchObject({
      value: 12.2,
      met: false,
    });
    // A run before the phase (no edgeOtlp) has none of its rows.
    const { edgeOtlp: _, ...before } = phases;
    expect(buildFigures(before).some((f) => f.id.startsWith("otlp."))).toBe(false);
  });

  it("shows issue 36's pipeline targets against bare Fastify per request", () => {
    const byId = new Map(buildFigures(phases).map((f) => [f.id, f]));
    // Single: the capacity table's 145 µs ÷ bare's 50 µs (issue 12 added the raw insert row).
    expect(byId.get("target36.pipelineCpu")).toMatchObject({
      value: 145,
      ceiling: { value: 50 },
      ratio: 2.9,
      met: false,
    });
    // Batches: 6 s over 300,000 reports = 20 µs, 0.4 of bare's.
    expect(byId.get("target36.batchPipelineCpu")).toMatchObject({
      value: 20,
      ratio: 0.4,
      met: true,
    });
    expect(byId.get("target36.batchStored")).toMatchObject({ value: 1, met: true });
    // Batches not carried until stored: nothing measured, so no target either way.
    const unstored = buildFigures({
      ...phases,
      edgeBatch: { ...phases.edgeBatch, cpuSecondsToStored: null, stored: null },
    });
    expect(unstored.find((f) => f.id === "target36.batchPipelineCpu")?.met).toBeNull();
  });

  it("sums the CPU of each component into the capacity table", () => {
    expect(
      ["edge", "edge 2", "worker 3", "redis", "redis replica 1", "clickhouse"].map(componentOf),
    ).toEqual(["edge", "edge", "worker", "Redis", "Redis replicas", "ClickHouse server"]);
    expect(componentOf("machine")).toBeNull();
    const c = capacityOf(phases.saturation);
    expect(c.reports).toBe(120_000);
    expect(c.components.map((r) => [r.component, r.usPerReport, r.coresPer100k])).toEqual([
      ["edge", 75, 7.5],
      ["Redis", 20, 2],
      ["worker", 30, 3],
      ["ClickHouse server", 20, 2],
    ]);
    expect(c.pipeline).toMatchObject({ processes: 4, cpuSeconds: 17.4, usPerReport: 145 });
    expect(c.generator).toMatchObject({ name: "wrk", requests: 120_000, usPerReport: 66.7 });

    const twoEdges = capacityOf({
      ...phases.saturation,
      cpuSecondsToStored: { "edge 1": 5, "edge 2": 4, "worker 1": 2, "worker 2": 1.6 },
    });
    expect(twoEdges.components).toMatchObject([
      { component: "edge", processes: 2, cpuSeconds: 9, usPerReport: 75 },
      { component: "worker", processes: 2, cpuSeconds: 3.6, usPerReport: 30 },
    ]);
  });

  it("renders one table row per figure, the capacity table, and the machine above them", () => {
    const figures = buildFigures(phases);
    const md = renderMarkdown({
      version: 1,
      machine: {
        cores: 2,
        memoryGiB: 24,
        cpuModel: "test cpu",
        node: "v20.0.0",
        platform: "linux x64",
        date: "2026-01-01T00:00:00.000Z",
      },
      command: "npm run bench -- --duration 10",
      source: { commit: "abc123", changedFiles: ["src/edge/app.ts"] },
      options: { durationS: 10 },
      settings: { BATCH_MAX_ROWS: "50000" },
      ...phases,
      figures,
      capacity: capacityOf(phases.saturation),
      batchCapacity: batchCapacityOf(phases.edgeBatch),
      summary: summarize(figures),
    });
    expect(md).toContain("- Command: `npm run bench -- --duration 10`");
    expect(md).toContain("Capacity (in batches of 100, phase 2b:");
    expect(md).toContain("2 cores (test cpu), 24 GiB");
    expect(md).toContain("BATCH_MAX_ROWS=50000");
    expect(md).toContain("commit abc123 with uncommitted changes to src/edge/app.ts");
    expect(md).toContain(
      "| accepted | 15,000 reports/s | ≥ 0.6× ceiling | 20,000 (bare Fastify) | 0.75× | yes |",
    );
    expect(md).toContain("503: 3");
    const [main = "", capacity = ""] = md.split("Capacity (");
    const rows = main.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| **"));
    expect(rows.length).toBe(figures.length + 1); // + the header
    expect(capacity).toContain("| edge | 1 | 9 s | 75 µs | 7.5 |");
    expect(capacity).toContain("| **whole pipeline** | 4 | 17.4 s | 145 µs | 14.5 |");
    expect(capacity).toContain("| load generator (wrk), per request | 1 | 8 s | 66.7 µs | 6.67 |");
  });
});
