import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { BenchResults } from "../../bench/figures.js";

// The benchmark harness end to end in --quick mode, as a child process writing to a temp dir:
// it must start and stop the whole stack and write well-formed results. No figure is judged here
// (timing depends on the machine); only that every one is present and a finite number.

const out = mkdtempSync(join(tmpdir(), "headroom-bench-smoke-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

function runQuick(): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "bench/run.ts", "--quick", "--out", out],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      output += c.toString();
    });
    // Bounded: a hung harness is stopped (it cleans up on SIGTERM) and the test fails.
    const timer = setTimeout(() => child.kill("SIGTERM"), 100_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

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
  "drain.rowsPerSec",
  "sat.sustained",
  "sat.accepted",
  "sat.p99",
  "sat.lag.p50",
  "sat.lag.p99",
  "sat.backlog.end",
  "sat.rss.edge",
  "sat.rss.worker-1",
  "sat.rss.clickhouse",
  "sat.rss.redis",
  "rate.accepted",
  "rate.p99",
  "rate.lag.p99",
  "rate.backlog.end",
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
    expect(r.options.quick).toBe(true);
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
    for (const id of ["ceiling.bare", "ceiling.bullmq", "ceiling.clickhouse", "edge.accepted"]) {
      expect(value(id), id).toBeGreaterThan(0);
    }
    expect(value("drain.complete")).toBe(1);
    expect(value("sat.complete")).toBe(1);
    expect(r.summary.targets).toBe(r.figures.filter((f) => f.targets.length).length);
    expect(existsSync(join(out, "profiles"))).toBe(false);
  });
});
