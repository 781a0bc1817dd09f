import { describe, expect, it } from "vitest";
import { latencyOf, parseLoadResult } from "../../bench/load-spec.js";
import { slope } from "../../bench/phase-e2e.js";
import { metricSum } from "../../bench/prometheus.js";
import { createBodySource } from "../../bench/report-bodies.js";
import { reportBodySchema } from "../../src/report/report-schema.js";

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
