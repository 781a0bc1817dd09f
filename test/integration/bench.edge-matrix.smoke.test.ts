import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { EdgeMatrixResults } from "../../bench/edge-matrix-figures.js";
import { runBenchCommand } from "../helpers/bench-command.js";

// `npm run bench:edge -- --quick` end to end, writing to a temp dir: every cell of issue 36's
// edge rows (wrk and autocannon, 64 and 512 connections) is measured and every figure is present
// and a finite number. No figure is judged (timing depends on the machine).

const out = mkdtempSync(join(tmpdir(), "headroom-bench-edge-smoke-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const CELLS = ["wrk.c64", "wrk.c512", "autocannon.c64", "autocannon.c512"];
const PER_CELL = [
  "bare",
  "bare.cpuPerRequest",
  "edge.accepted",
  "edge.cpuPerReport",
  "edge.rss",
  "batch.accepted",
  "batch.cpuPerReport",
  "batch.rss",
  "bare.cpu.load",
  "edge.cpu.load",
  "batch.cpu.load",
];

describe("npm run bench:edge -- --quick", () => {
  it("measures bare Fastify and the edge with both generators at both concurrencies", {
    timeout: 200_000,
  }, async () => {
    const { code, output } = await runBenchCommand(
      "bench/edge-matrix.ts",
      ["--quick", "--duration", "2", "--out", out],
      180_000,
    );
    expect(code, output.slice(-4_000)).toBe(0);
    expect(output).toContain("| Figure | Value | Target | Ceiling | Ratio | Met |");
    expect(output).toContain("- Command: `npm run bench:edge -- --quick --duration 2 --out ");
    expect(readdirSync(out)).toEqual(
      expect.arrayContaining(["edge-latest.json", "edge-latest.md"]),
    );

    const r = JSON.parse(readFileSync(join(out, "edge-latest.json"), "utf8")) as EdgeMatrixResults;
    expect(r.cells.map((c) => [c.generator, c.connections])).toEqual([
      ["wrk", 64],
      ["wrk", 512],
      ["autocannon", 64],
      ["autocannon", 512],
    ]);
    const byId = new Map(r.figures.map((f) => [f.id, f]));
    for (const cell of CELLS) {
      for (const id of PER_CELL) expect(byId.has(`${cell}.${id}`), `${cell}.${id}`).toBe(true);
      // Real traffic reached both servers, through the generator the cell names.
      for (const id of ["bare", "edge.accepted", "batch.accepted", "edge.cpuPerReport"]) {
        expect(byId.get(`${cell}.${id}`)?.value, `${cell}.${id}`).toBeGreaterThan(0);
      }
      // Each RSS row stands beside the peak of that cell's own bare Fastify process.
      for (const id of ["edge.rss", "batch.rss"]) {
        expect(byId.get(`${cell}.${id}`)?.ceiling?.value, `${cell}.${id}`).toBeGreaterThan(0);
      }
    }
    for (const c of r.cells) {
      for (const load of [c.bare.load, c.edge.load, c.batch.load]) {
        expect(load).toMatchObject({ generator: c.generator, generators: 1 });
        expect(load.generatorCpuS).toBeGreaterThan(0);
      }
    }
    for (const f of r.figures) {
      expect(Number.isFinite(f.value), f.id).toBe(true);
      if (f.ceiling) expect(Number.isFinite(f.ratio), f.id).toBe(true);
      if (f.targets.length) expect(typeof f.met, f.id).toBe("boolean");
    }
    expect(r.summary.targets).toBe(CELLS.length * 4);
  });
});
