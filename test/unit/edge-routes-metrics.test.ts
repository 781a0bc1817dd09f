import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { BacklogGate } from "../../src/edge/backlog.js";
import { createEdgeMetrics } from "../../src/edge/metrics.js";
import { buildMetricsApp } from "../../src/edge/routes/metrics.js";
import { type FakeEdge, fakeEdge } from "../helpers/edge-fakes.js";

// GET /metrics of the edge (src/edge/routes/metrics.ts) through buildApp, on fakes of its
// injected dependencies: Prometheus text with the backlog's figures, behind METRICS_TOKEN when
// one is set, and absent from the public listener when METRICS_PORT is.

const TOKEN = "m".repeat(32);
let edge: FakeEdge;
afterEach(async () => edge?.app.close());

describe("GET /metrics", () => {
  it("answers Prometheus text with the backlog's figures", async () => {
    edge = fakeEdge();
    edge.fillBacklog();
    const res = await edge.app.inject({ url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.body).toMatch(/^headroom_backlog_jobs 1000000$/m);
    expect(res.body).toMatch(/^headroom_backlog_max_jobs 1000000$/m);
  });

  it("needs METRICS_TOKEN when one is set", async () => {
    edge = fakeEdge({ METRICS_TOKEN: TOKEN });
    const none = await edge.app.inject({ url: "/metrics" });
    expect(none.statusCode).toBe(401);
    expect(none.headers["www-authenticate"]).toBe("Bearer");
    const wrong = await edge.app.inject({
      url: "/metrics",
      headers: { authorization: `Bearer ${"x".repeat(32)}` },
    });
    expect(wrong.statusCode).toBe(401);
    const right = await edge.app.inject({
      url: "/metrics",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(right.statusCode).toBe(200);
  });

  it("is not on the public listener when METRICS_PORT is set", async () => {
    edge = fakeEdge({ METRICS_PORT: "9464" });
    expect((await edge.app.inject({ url: "/metrics" })).statusCode).toBe(404);
  });
});

describe("the METRICS_PORT listener", () => {
  it("starts without a warning on the operator's terminal (Fastify's deprecated options)", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push(`${w.code}: ${w.message}`);
    process.on("warning", onWarning);
    const app = buildMetricsApp({
      config: {},
      backlog: { maxJobs: 1 } as BacklogGate,
      metrics: createEdgeMetrics(),
      logger: pino({ level: "silent" }),
    });
    try {
      await app.ready();
      // process.emitWarning is delivered on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await app.close();
    }
  });
});
