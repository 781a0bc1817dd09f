import { afterEach, describe, expect, it } from "vitest";
import { type FakeEdge, fakeEdge } from "../helpers/edge-fakes.js";

// GET /healthz and /readyz (src/edge/routes/health.ts) through buildApp, on fakes of the edge's
// injected dependencies: ready or not, with the figures only for the metrics token's holder.

const TOKEN = "t".repeat(32);
let edge: FakeEdge;
afterEach(async () => edge?.app.close());

describe("health routes", () => {
  it("answers /healthz while the process runs, /readyz 503 once the backlog is over its bound", async () => {
    edge = fakeEdge();
    expect((await edge.app.inject({ url: "/healthz" })).json()).toEqual({ status: "ok" });
    const ready = await edge.app.inject({ url: "/readyz" });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: "ok" });
    edge.fillBacklog();
    const full = await edge.app.inject({ url: "/readyz" });
    expect(full.statusCode).toBe(503);
    // No figures, and no reason, without the token.
    expect(full.json()).toEqual({ status: "unavailable" });
  });

  it("tells the figures and the reason to the metrics token's holder only", async () => {
    edge = fakeEdge({ METRICS_TOKEN: TOKEN });
    edge.fillBacklog();
    const res = await edge.app.inject({
      url: "/readyz",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({
      status: "unavailable",
      checks: { backlog: { ok: false, jobs: 1_000_000 } },
      reason: "the backlog is over its bound",
    });
    const wrong = await edge.app.inject({
      url: "/readyz",
      headers: { authorization: `Bearer ${"x".repeat(32)}` },
    });
    expect(wrong.json()).toEqual({ status: "unavailable" });
  });
});
