import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { BenchResults } from "../../bench/run-results.js";
import { runBenchCommand } from "../helpers/bench-command.js";

// The benchmark harness end to end in --quick mode, as a child process writing to a temp dir:
// it must start and stop the whole stack and write well-formed results. No figure is judged here
// (timing depends on the machine); only that every one is present and a finite number. It runs
// scaled out (2 edges with a wrk each, 2 workers, 2 queue shards, a Redis replica) so that every
// path of the harness is taken.

const out = mkdtempSync(join(tmpdir(), "headroom-bench-smoke-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const runQuick = () =>
  runBenchCommand(
    "bench/run.ts",
    [
      "--quick",
      "--out",
      out,
      ...["--edges", "2", "--workers", "2", "--shards", "2", "--ack-replicas", "1"],
    ],
    100_000,
  );

const REQUIRED = [
  "ceiling.bare",
  "ceiling.bullmq",
  "ceiling.clickhouse",
  "edge.accepted",
  "edge.p50",
  "edge.p99",
  "edge.max",
  "edge.rss",
  "edge.redis.bytes",
  "batch.accepted",
  "batch.cpuPerReport",
  "batch.rss",
  // Issue 47's OTLP phase (2c), beside the batches.
  "otlp.accepted",
  "otlp.cpuPerSpan",
  "otlp.duplicates",
  "target47.otlpEdgeCpu",
  "drain.rowsPerSec",
  "sat.sustained",
  "sat.accepted",
  "sat.p99",
  "sat.lag.p50",
  "sat.lag.p99",
  "sat.backlog.end",
  "sat.rss.edge-1",
  "sat.rss.edge-2",
  "sat.rss.worker-1",
  "sat.rss.worker-2",
  "sat.rss.clickhouse",
  "sat.rss.redis",
  "sat.rss.redis-replica-1",
  "rate.accepted",
  "rate.p99",
  "rate.lag.p99",
  "rate.backlog.end",
  // The load generator's CPU in every phase with load.
  "ceiling.bare.cpu.load",
  "edge.cpu.load",
  "sat.cpu.load",
  "rate.cpu.load",
  // Issue 12's targets.
  "target.edgeCpu",
  "target.reportsPerJob",
  "target.drain",
  "target.pipelineCpu",
  "target.sustained",
  "target.batchEdgeCpu",
  "target.edgeRss",
  "target.redisBytes",
  // Issue 36's pipeline rows.
  "target36.pipelineCpu",
  "target36.batchPipelineCpu",
  "target36.batchStored",
];

describe("npm run bench -- --quick", () => {
  it("runs the whole stack and writes well-formed results", { timeout: 120_000 }, async () => {
    const { code, output } = await runQuick();
    expect(code, output.slice(-4_000)).toBe(0);
    expect(output).toContain("| Figure | Value | Target | Ceiling | Ratio | Met |");

    const files = readdirSync(out);
    expect(files).toContain("latest.json");
    expect(files).toContain("latest.md");
    expect(files.filter((f) => /^\d{4}-\d{2}-\d{2}T.*\.json$/.test(f))).toHaveLength(1);

    const r = JSON.parse(readFileSync(join(out, "latest.json"), "utf8")) as BenchResults;
    expect(r.version).toBe(1);
    expect(r.machine.cores).toBeGreaterThan(0);
    expect(r.machine.node).toBe(process.version);
    expect(r.options).toMatchObject({
      quick: true,
      edges: 2,
      workers: 2,
      shards: 2,
      ackReplicas: 1,
    });
    expect(r.settings).toMatchObject({ QUEUE_SHARDS: "2", REDIS_ACK_REPLICAS: "1" });
    expect(r.source.commit).toMatch(/^[0-9a-f]{7,}$/);

    const ids = new Set(r.figures.map((f) => f.id));
    for (const id of REQUIRED) expect(ids.has(id), id).toBe(true);
    for (const f of r.figures) {
      expect(Number.isFinite(f.value), f.id).toBe(true);
      if (f.ceiling) {
        expect(Number.isFinite(f.ceiling.value), f.id).toBe(true);
        expect(Number.isFinite(f.ratio), f.id).toBe(true);
      }
      if (f.targets.length) expect(typeof f.met, f.id).toBe("boolean");
    }
    // Real traffic went through every stage.
    const value = (id: string) => r.figures.find((f) => f.id === id)?.value ?? 0;
    for (const id of [
      "ceiling.bare",
      "ceiling.bullmq",
      "ceiling.clickhouse",
      "edge.accepted",
      "batch.accepted",
      "otlp.accepted",
    ]) {
      // The phases' answers (statuses, errors) say why a stage accepted nothing.
      const loads = { edge: r.edgeAlone.load, batch: r.edgeBatch.load, otlp: r.edgeOtlp?.load };
      expect(value(id), `${id}: ${JSON.stringify(loads)}`).toBeGreaterThan(0);
    }
    expect(value("drain.complete")).toBe(1);
    // Every export's spans had new ids: the normal path, not the exporter-retry one.
    expect(value("otlp.duplicates")).toBe(0);
    // Phase 2b's batches were carried until stored, and their capacity table has every process.
    expect(value("target36.batchStored")).toBe(1);
    expect(r.batchCapacity?.components.map((row) => row.component)).toEqual([
      "edge",
      "Redis",
      "Redis replicas",
      "worker",
      "ClickHouse server",
    ]);
    expect(r.command).toMatch(/^npm run bench -- --quick --out /);
    expect(value("sat.complete")).toBe(1);
    // One wrk per edge, both of them loaded.
    expect(r.edgeAlone.load).toMatchObject({ generator: "wrk", generators: 2 });
    expect(r.edgeBatch.load).toMatchObject({ generator: "wrk", generators: 2 });
    expect(value("edge.cpu.edge-1")).toBeGreaterThan(0);
    expect(value("edge.cpu.edge-2")).toBeGreaterThan(0);

    // The capacity table: every component with its processes, CPU per report finite and positive.
    const c = r.capacity;
    expect(c.reports).toBe(r.saturation.enqueued);
    expect(c.components.map((row) => [row.component, row.processes])).toEqual([
      ["edge", 2],
      ["Redis", 1],
      ["Redis replicas", 1],
      ["worker", 2],
      ["ClickHouse server", 1],
    ]);
    for (const row of [...c.components, c.pipeline, c.generator]) {
      expect(Number.isFinite(row.usPerReport), row.component).toBe(true);
      expect(row.usPerReport, row.component).toBeGreaterThan(0);
    }
    expect(output).toContain("| **whole pipeline** |");
    expect(r.summary.targets).toBe(r.figures.filter((f) => f.targets.length).length);
    expect(existsSync(join(out, "profiles"))).toBe(false);
  });
});
