import { afterEach, describe, expect, it } from "vitest";
import { sampleBody } from "../../fixtures/sample-reports.js";
import { EDGE_PROJECT, edgeKeys, type FakeEdge, fakeEdge } from "../helpers/edge-fakes.js";

// POST /api/report (src/edge/routes/report.ts) through buildApp, on fakes of the edge's injected
// dependencies: the answer and the row queued, then each refusal in the contract's order.

const URL = "/api/report";
let edge: FakeEdge;
afterEach(async () => edge?.app.close());

describe("POST /api/report", () => {
  it("answers the report's id once its job is acknowledged, and queues it for the key's project", async () => {
    edge = fakeEdge();
    const res = await edge.post(URL, sampleBody(1));
    expect(res.statusCode).toBe(200);
    const { id } = res.json();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(edge.queued).toHaveLength(1);
    expect(edge.queued[0]).toMatchObject({ report_id: id, project_id: EDGE_PROJECT });
  });

  it("refuses a body that is not JSON, not a report, or not JSON by its media type", async () => {
    edge = fakeEdge();
    const notJson = await edge.post(URL, "{nope");
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json()).toMatchObject({ error: "invalid_json" });
    const notReport = await edge.post(URL, { app: "chat-api" });
    expect(notReport.statusCode).toBe(400);
    expect(notReport.json()).toMatchObject({ error: "invalid_report" });
    expect(notReport.json().issues.length).toBeGreaterThan(0);
    const text = await edge.post(URL, "app=x", { contentType: "text/plain" });
    expect(text.statusCode).toBe(415);
    expect(edge.queued).toEqual([]);
  });

  it("needs a report key: none is 401, a read key is 403", async () => {
    edge = fakeEdge();
    const none = await edge.post(URL, sampleBody(1), { key: null });
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ error: "missing_project_key" });
    const read = await edge.post(URL, sampleBody(1), { key: edgeKeys.read });
    expect(read.statusCode).toBe(403);
    expect(read.json()).toMatchObject({ error: "insufficient_scope" });
    expect(edge.queued).toEqual([]);
  });

  it("answers 429 past the burst limit, 503 over the backlog or when Redis refuses the job", async () => {
    edge = fakeEdge();
    edge.closeBurst();
    const limited = await edge.post(URL, sampleBody(1));
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: "rate_limited", limit: 1, remaining: 0 });

    const full = fakeEdge();
    full.fillBacklog();
    const over = await full.post(URL, sampleBody(1));
    expect(over.statusCode).toBe(503);
    expect(over.json()).toMatchObject({ error: "unavailable" });

    const failing = fakeEdge();
    failing.failEnqueue();
    expect((await failing.post(URL, sampleBody(1))).statusCode).toBe(503);
    await Promise.all([full.app.close(), failing.app.close()]);
    expect([...edge.queued, ...full.queued, ...failing.queued]).toEqual([]);
  });

  it("answers 405 to any other method", async () => {
    edge = fakeEdge();
    const res = await edge.app.inject({ method: "GET", url: URL });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe("POST");
  });
});
