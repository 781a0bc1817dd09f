import { describe, expect, it } from "vitest";
import { figure, summarize } from "../../bench/figure.js";
import { buildFigures, type PhaseResults } from "../../bench/figures.js";
import type { LoadResult } from "../../bench/load-spec.js";
import type { EndToEndPhase } from "../../bench/phase-e2e.js";
import { renderMarkdown } from "../../bench/render.js";

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
    },
  },
  edgeAlone: {
    load: load(15_000),
    enqueued: 150_000,
    jobs: 1_500,
    edgePeakRssMb: 180,
    redisBytesPerReport: 300,
    redisUsedMb: 50,
    cpuCores: { edge: 1, redis: 0.2 },
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
    expect(byId.get("drain.rowsPerSec")).toMatchObject({ ratio: 0.625, met: false });
    expect(byId.get("sat.sustained")?.met).toBe(false);
    expect(byId.get("edge.non200")?.value).toBe(4);
    expect(byId.get("rate.accepted")?.ratio).toBe(1);
    // Whole machine 2 cores, bare server 1 and generator 0.8: 0.2 went to other processes.
    expect(byId.get("ceiling.bare.cpu.others")?.value).toBe(0.2);
    const s = summarize(figures);
    expect(s.targets).toBe(figures.filter((f) => f.targets.length > 0).length);
    expect(s.met).toBeLessThan(s.targets);
  });

  it("renders one table row per figure, with the machine above it", () => {
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
      source: { commit: "abc123", changedFiles: ["src/edge/app.ts"] },
      options: { durationS: 10 },
      settings: { BATCH_MAX_ROWS: "50000" },
      ...phases,
      figures,
      summary: summarize(figures),
    });
    expect(md).toContain("2 cores (test cpu), 24 GiB");
    expect(md).toContain("BATCH_MAX_ROWS=50000");
    expect(md).toContain("commit abc123 with uncommitted changes to src/edge/app.ts");
    expect(md).toContain(
      "| accepted | 15,000 reports/s | ≥ 0.6× ceiling | 20,000 (bare Fastify) | 0.75× | yes |",
    );
    expect(md).toContain("503: 3");
    const rows = md.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| **"));
    expect(rows.length).toBe(figures.length + 1); // + the header
  });
});
