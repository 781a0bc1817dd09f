import { afterEach, describe, expect, it } from "vitest";
import { sampleBody } from "../../fixtures/sample-reports.js";
import { EDGE_PROJECT, edgeKeys, type FakeEdge, fakeEdge } from "../helpers/edge-fakes.js";

// POST /api/reports (src/edge/routes/batch.ts) through buildApp, on fakes of the edge's injected
// dependencies: results per item, ids answered as duplicates, and the refusals of the whole.

const URL = "/api/reports";
const ID = "0190a000-0000-7000-8000-000000000001";
let edge: FakeEdge;
afterEach(async () => edge?.app.close());

describe("POST /api/reports", () => {
  it("answers 200 with each item's id when every item is taken, as JSON or NDJSON", async () => {
    edge = fakeEdge();
    const res = await edge.post(URL, [sampleBody(1), sampleBody(2)]);
    expect(res.statusCode).toBe(200);
    const { results } = res.json();
    expect(results).toHaveLength(2);
    expect(edge.queued.map((r) => r.report_id)).toEqual(results.map((r: { id: string }) => r.id));
    expect(edge.queued.every((r) => r.project_id === EDGE_PROJECT)).toBe(true);

    const ndjson = [sampleBody(3), sampleBody(4)].map((b) => JSON.stringify(b)).join("\n");
    const nd = await edge.post(URL, ndjson, { contentType: "application/x-ndjson" });
    expect(nd.statusCode).toBe(200);
    expect(edge.queued).toHaveLength(4);
  });

  it("answers 207 with each bad item's error beside the good items' ids", async () => {
    edge = fakeEdge();
    const res = await edge.post(URL, [sampleBody(1), { app: "x" }]);
    expect(res.statusCode).toBe(207);
    const { results } = res.json();
    expect(results[0]).toHaveProperty("id");
    expect(results[1]).toMatchObject({ error: "invalid_report" });
    expect(edge.queued).toHaveLength(1);
  });

  it("stores a client's id once: sent again, it is answered as a duplicate", async () => {
    edge = fakeEdge();
    const first = await edge.post(URL, [{ ...sampleBody(1), id: ID }]);
    expect(first.json().results).toEqual([{ id: ID }]);
    const again = await edge.post(URL, [{ ...sampleBody(1), id: ID }]);
    expect(again.statusCode).toBe(200);
    expect(again.json().results).toEqual([{ id: ID, duplicate: true }]);
    expect(edge.queued).toHaveLength(1);
  });

  it("refuses a body that is not an array, a media type it does not take, and a read key", async () => {
    edge = fakeEdge();
    expect((await edge.post(URL, sampleBody(1))).statusCode).toBe(400);
    const text = await edge.post(URL, "[]", { contentType: "text/plain" });
    expect(text.statusCode).toBe(415);
    expect(text.json()).toMatchObject({ error: "unsupported_media_type" });
    const read = await edge.post(URL, [sampleBody(1)], { key: edgeKeys.read });
    expect(read.statusCode).toBe(403);
    expect(edge.queued).toEqual([]);
  });

  it("refuses every item past the burst limit, and the whole batch over the backlog", async () => {
    edge = fakeEdge();
    edge.closeBurst();
    const limited = await edge.post(URL, [sampleBody(1), sampleBody(2)]);
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: "rate_limited", limit: 1 });

    const full = fakeEdge();
    full.fillBacklog();
    const over = await full.post(URL, [sampleBody(1)]);
    expect(over.statusCode).toBe(503);
    await full.app.close();
    expect([...edge.queued, ...full.queued]).toEqual([]);
  });
});
