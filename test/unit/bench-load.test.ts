import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fileLines, latencyOf, parseLoadResult } from "../../bench/load-spec.js";
import { slope } from "../../bench/phase-e2e.js";
import { countsOf, withEdgeStatuses } from "../../bench/phase-edge.js";
import { metricByLabel, metricSum } from "../../bench/prometheus.js";
import { createBodySource, writeLoadFiles } from "../../bench/report-bodies.js";
import {
  mergeWrk,
  parseWrkOutput,
  splitConnections,
  type WrkSummary,
  wrkArgs,
} from "../../bench/wrk.js";
import { reportBodySchema } from "../../src/report/report-schema.js";

const wrkSummary = (over: Partial<WrkSummary> = {}): WrkSummary => ({
  wrk: 1,
  durationUs: 10_000_000,
  requests: 100_000,
  bytes: 5_000_000,
  errors: { connect: 0, read: 1, write: 0, status: 30, timeout: 2 },
  latencyUs: { p50: 2_000, p90: 4_000, p99: 9_000, max: 50_000, mean: 2_500 },
  statuses: {},
  cpuSeconds: 1.5,
  ...over,
});

describe("bench load pieces", () => {
  it("sends valid, varied report bodies with the current time as timestamp", () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 0, 5);
    const source = createBodySource(64, () => now);
    const bodies = Array.from({ length: 64 }, (_, i) => JSON.parse(source.body(i)));
    for (const b of bodies) expect(reportBodySchema.safeParse(b).success).toBe(true);
    expect(bodies[0].timestamp).toBe("2026-01-01T12:00:00.005Z");
    expect(new Set(bodies.map((b) => b.provider)).size).toBeGreaterThan(2);
    expect(bodies.some((b) => b.model === null)).toBe(true); // provider hints
    expect(bodies.some((b) => b.credits?.request_cost)).toBe(true);
    now += 1_000;
    expect(JSON.parse(source.body(0)).timestamp).toBe("2026-01-01T12:00:01.005Z");
  });

  it("writes one body per line and one key per line for the generators", () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-load-files-"));
    try {
      const now = Date.UTC(2026, 0, 1, 12, 0, 0, 0);
      const files = writeLoadFiles(dir, "edge", ["k1", "k2"], { bodies: 100, now: () => now });
      const bodies = fileLines(readFileSync(files.bodiesFile, "utf8"));
      expect(bodies).toHaveLength(100);
      for (const b of bodies) {
        const parsed = JSON.parse(b);
        expect(reportBodySchema.safeParse(parsed).success).toBe(true);
        expect(parsed.timestamp).toBe("2026-01-01T12:00:00.000Z");
      }
      expect(fileLines(readFileSync(files.keysFile, "utf8"))).toEqual(["k1", "k2"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("computes latency percentiles", () => {
    const values = Float64Array.from({ length: 1_000 }, (_, i) => 1_000 - i);
    expect(latencyOf(values)).toEqual({ p50: 501, p90: 901, p99: 991, max: 1_000, mean: 500.5 });
    expect(latencyOf(new Float64Array(0)).p99).toBe(0);
  });

  it("reads the generator's last JSON line and refuses anything else", () => {
    const r = { ok: 5, latencyMs: { p99: 1 } };
    expect(parseLoadResult(`noise\n${JSON.stringify(r)}\n`).ok).toBe(5);
    expect(() => parseLoadResult("nothing here")).toThrow(/no result/);
    expect(() => parseLoadResult('{"ok":"x"}')).toThrow(/malformed/);
  });

  it("reads wrk's result line and refuses anything else", () => {
    const line = JSON.stringify(wrkSummary());
    expect(parseWrkOutput(`Running 10s test @ http://x\n  1 threads\n${line}\n`).requests).toBe(
      100_000,
    );
    expect(() => parseWrkOutput("unable to connect to 127.0.0.1:1")).toThrow(/no result/);
    expect(() => parseWrkOutput('{"requests":1}')).toThrow(/malformed/);
  });

  it("splits connections between the edges, one wrk each, and passes the files to the script", () => {
    expect(splitConnections(64, 1)).toEqual([64]);
    expect(splitConnections(64, 3)).toEqual([22, 21, 21]);
    expect(splitConnections(2, 2)).toEqual([1, 1]);
    const args = wrkArgs({
      url: "http://127.0.0.1:3000",
      connections: 32,
      durationS: 15,
      bodiesFile: "/t/b",
      keysFile: "/t/k",
    });
    expect(args).toContain("--connections=32");
    expect(args).toContain("--duration=15s");
    expect(args).toContain("--threads=1");
    expect(args.find((a) => a.startsWith("--script="))).toMatch(/bench\/wrk-report\.lua$/);
    expect(args.slice(args.indexOf("--"))).toEqual(["--", "/t/b", "/t/k", "0"]);
  });

  it("sums several wrks: rates and CPU add up, percentiles are the highest, failures kept", () => {
    const one = mergeWrk([wrkSummary()], 1_700_000_000_000);
    expect(one).toMatchObject({
      mode: "saturate",
      durationS: 10,
      sent: 100_000,
      ok: 99_970,
      okPerSec: 9_997,
      errors: 3,
      statuses: { "4xx/5xx": 30 },
      generatorCpuS: 1.5,
      generatorCores: 0.15,
      generator: "wrk",
      generators: 1,
    });
    expect(one.latencyMs).toEqual({ p50: 2, p90: 4, p99: 9, max: 50, mean: 2.5 });
    const two = mergeWrk(
      [
        wrkSummary(),
        wrkSummary({
          requests: 300_000,
          errors: { connect: 0, read: 0, write: 0, status: 0, timeout: 0 },
          latencyUs: { p50: 1_000, p90: 5_000, p99: 8_000, max: 60_000, mean: 1_500 },
          statuses: { 200: 300_000 },
        }),
      ],
      0,
    );
    expect(two.okPerSec).toBe(9_997 + 30_000);
    expect(two.generatorCpuS).toBe(3);
    expect(two.generators).toBe(2);
    expect(two.latencyMs).toEqual({ p50: 2, p90: 5, p99: 9, max: 60, mean: 1.75 });
    // The Lua script's tally without the 200s, and what wrk counted as failed beyond it.
    expect(two.statuses).toEqual({ "4xx/5xx": 30 });
    const tallied = mergeWrk([wrkSummary({ statuses: { 200: 99_970, 429: 10, 503: 20 } })], 0);
    expect(tallied.statuses).toEqual({ 429: 10, 503: 20 });
  });

  it("takes the failed answers' statuses from the edges' own counts", () => {
    const text = (ok: number, busy: number) =>
      [
        `headroom_http_requests_total{route="/api/report",status="200"} ${ok}`,
        `headroom_http_requests_total{route="/api/report",status="503"} ${busy}`,
        'headroom_http_requests_total{route="/metrics",status="200"} 7',
        `headroom_reports_per_job_sum ${ok}`,
        "headroom_reports_per_job_count 10",
      ].join("\n");
    const before = countsOf([text(100, 1), text(50, 0)]);
    expect(before).toEqual({ reports: 150, jobs: 20, statuses: { 200: 150, 503: 1 } });
    const after = countsOf([text(1_100, 5), text(1_050, 26)]);
    const load = mergeWrk([wrkSummary()], 0);
    expect(withEdgeStatuses(load, before, after).statuses).toEqual({ 503: 30 });
    // Nothing from the edges (none failed, or no such metric): wrk's own count stays.
    expect(withEdgeStatuses(mergeWrk([wrkSummary()], 0), after, after).statuses).toEqual({
      "4xx/5xx": 30,
    });
  });

  it("sums Prometheus samples by name and labels", () => {
    const text = [
      "# HELP headroom_http_requests_total x",
      'headroom_http_requests_total{route="/api/report",status="200"} 10',
      'headroom_http_requests_total{route="/api/report",status="429"} 2',
      'headroom_http_requests_total{route="/healthz",status="200"} 1',
      "headroom_reports_per_job_sum 1234",
      "headroom_reports_per_job_sum_other 9",
    ].join("\n");
    expect(metricSum(text, "headroom_http_requests_total")).toBe(13);
    expect(metricSum(text, "headroom_http_requests_total", { status: "200" })).toBe(11);
    expect(metricSum(text, "headroom_reports_per_job_sum")).toBe(1234);
    expect(metricSum(text, "missing")).toBe(0);
    expect(metricByLabel(text, "headroom_http_requests_total", "status")).toEqual({
      200: 11,
      429: 2,
    });
    expect(
      metricByLabel(text, "headroom_http_requests_total", "status", { route: "/api/report" }),
    ).toEqual({ 200: 10, 429: 2 });
  });

  it("fits the backlog trend", () => {
    expect(
      slope([
        [0, 10],
        [1, 12],
        [2, 14],
      ]),
    ).toBeCloseTo(2);
    expect(
      slope([
        [0, 5],
        [1, 5],
      ]),
    ).toBe(0);
    expect(slope([[0, 5]])).toBe(0);
  });
});
