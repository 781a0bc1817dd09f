import { describe, expect, it } from "vitest";
import { summarize } from "../../bench/figure.js";
import type { HeadroomCeiling } from "../../bench/headroom-ceiling.js";
import type { LoadResult } from "../../bench/load-spec.js";
import { readFigures } from "../../bench/read-figures.js";
import type { ReadLoadResult } from "../../bench/read-load.js";
import { renderFigures } from "../../bench/render.js";

const load = (okPerSec: number): LoadResult => ({
  mode: "saturate",
  durationS: 10,
  startedAt: 1_700_000_000_000,
  sent: okPerSec * 10,
  ok: okPerSec * 10,
  okPerSec,
  statuses: {},
  errors: 0,
  latencyMs: { p50: 1, p90: 2, p99: 3, max: 4, mean: 1 },
  unsent: 0,
  generatorCores: 0.5,
  generatorCpuS: 5,
  generator: "wrk",
  generators: 1,
});

const ceiling: HeadroomCeiling = {
  bytes: 2_000,
  encoding: "identity",
  api: { load: load(10_000), cpuCores: { api: 0.5 }, peakRssMb: {} },
  bare: { load: load(20_000), cpuCores: { "bare Fastify": 0.5 }, peakRssMb: {} },
};

const endpoint = (statuses: Record<string, number>, p50: number, p99: number, readers = 50) => ({
  readers,
  requests: Object.values(statuses).reduce((a, b) => a + b, 0),
  perSec: 2,
  statuses,
  latencyMs: { p50, p90: p99, p99, max: p99, mean: p50 },
  bytes: { sent: 1, decoded: 1, decodedAnswers: 1, encodings: {} },
});

const reads = (byEndpoint: ReadLoadResult["byEndpoint"]): ReadLoadResult => ({
  readers: 50,
  model: "dashboards",
  durationS: 10,
  requests: 0,
  acceptEncoding: "gzip, deflate, br",
  decodeEvery: 20,
  byEndpoint,
});

/** The figures of a dashboards run with these endpoints' answers, beside ingest at 2,000/s. */
const figuresOf = (byEndpoint: ReadLoadResult["byEndpoint"]) =>
  readFigures(ceiling, reads(byEndpoint), 2_000);
const byIdOf = (byEndpoint: ReadLoadResult["byEndpoint"]) =>
  new Map(figuresOf(byEndpoint).map((f) => [f.id, f]));

describe("bench read figures", () => {
  it("a latency over failed answers is invalid and never met, however small", () => {
    const figures = figuresOf({
      headroom: endpoint({ "200": 250 }, 8, 40),
      // Every /usage answer was a 400: quick to refuse, and no result.
      usage: endpoint({ "400": 17 }, 3, 5),
    });
    const byId = new Map(figures.map((f) => [f.id, f]));
    expect(byId.get("read.usage.p50")).toMatchObject({
      value: 3,
      met: false,
      invalid: "17 of 17 answers were 400",
    });
    expect(byId.get("read.usage.p99")).toMatchObject({ met: false, invalid: expect.any(String) });
    expect(byId.get("read.headroom.p99")).toMatchObject({ met: true, invalid: null });
    // Its p50, p99 and p99 ÷ p50.
    expect(summarize(figures)).toMatchObject({ invalid: 3 });
    const rows = renderFigures(figures).filter((l) => l.includes("17 of 17"));
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row).toContain("~~");
      expect(row).toContain("**invalid**");
    }
  });

  it("the page's /usage is held to issue 48's 20 / 100 ms; the rolling minute query is shown beside", () => {
    const byId = byIdOf({
      headroom: endpoint({ "200": 250 }, 8, 40),
      usage: endpoint({ "200": 80, "304": 4 }, 15, 120),
      "usage-rolling-minute": endpoint({ "200": 9 }, 600, 900, 5),
    });
    expect(byId.get("read.usage.p50")).toMatchObject({
      met: true,
      invalid: null,
      targets: [{ on: "value", op: "<=", value: 20 }],
    });
    expect(byId.get("read.usage.p99")).toMatchObject({
      met: false,
      targets: [{ on: "value", op: "<=", value: 100 }],
    });
    const rolling = byId.get("read.usageRollingMinute.p50");
    expect(rolling).toMatchObject({ value: 600, met: null, invalid: null, targets: [] });
    expect(rolling?.label).toContain("5 dashboards");
  });

  it("on 2 shared cores, /headroom's and /usage's p99 are held within 10 times their p50", () => {
    const byId = byIdOf({
      headroom: endpoint({ "200": 250 }, 8, 82),
      usage: endpoint({ "200": 84 }, 9, 85),
      "alerts-events": endpoint({ "200": 84 }, 1, 90),
    });
    expect(byId.get("read.headroom.p99VsP50")).toMatchObject({
      value: 82,
      ratio: 10.25,
      met: false,
      targets: [{ on: "ratio", op: "<=", value: 10 }],
    });
    expect(byId.get("read.usage.p99VsP50")).toMatchObject({ value: 85, met: true });
    const none = byIdOf({
      headroom: endpoint({ "200": 250 }, 0, 5),
      usage: endpoint({ "200": 84 }, 9, 85),
    });
    expect(none.get("read.headroom.p99VsP50")).toMatchObject({
      met: false,
      invalid: "no p50",
    });
    // The issue bounds the page's /usage and /headroom, not every endpoint.
    expect(byId.has("read.alertsEvents.p99VsP50")).toBe(false);
  });

  it("a missing endpoint's figures are invalid, not zero milliseconds", () => {
    expect(byIdOf({}).get("read.headroom.p50")).toMatchObject({
      invalid: "no answers from headroom",
    });
  });
});
