import { gunzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeReadApi, fakeReadApi, keys, READ_PROJECT } from "../helpers/read-api-fakes.js";

// GET /api/v1/metrics through buildApiApp, on fakes of its store and key look-up: /headroom's
// figures as gauges and today's daily rollup as counters, the format by Accept, gzip when asked,
// its validation errors, and its scopes.

const T = Date.UTC(2030, 5, 15, 12, 0, 0);
const SERIES = 'provider="openai",model="gpt-4o",app="chat-api"';

let api: FakeReadApi;
afterEach(async () => api?.app.close());

function withOneSeries() {
  api = fakeReadApi({ now: T });
  api.answer(/last_seen, limits_at, credits_at/, () => [
    {
      provider: "openai",
      model: "gpt-4o",
      app: "chat-api",
      last_seen: String(T - 5_000),
      limits_at: String(T - 5_000),
      credits_at: null,
      requests_limit: "100",
      requests_remaining: "40",
      tokens_limit: null,
      tokens_remaining: null,
      reset_requests_ms: null,
      reset_tokens_ms: null,
      credits_limit: null,
      credits_remaining: null,
    },
  ]);
  api.answer(/FROM fake\.reports_daily/, () => [
    { provider: "openai", model: "gpt-4o", app: "chat-api", reports: "12", hints: "2", cost: 0.5 },
  ]);
}

describe("GET /api/v1/metrics", () => {
  it("answers /headroom's figures as gauges and today's rollup as counters", async () => {
    withOneSeries();
    const res = await api.get("/api/v1/metrics");
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(res.headers.vary).toBe("Accept, Accept-Encoding");
    const lines = res.body.split("\n");
    const requests = `${SERIES},kind="requests",dimension="requests",window="unknown"`;
    expect(lines).toEqual(
      expect.arrayContaining([
        `headroom_limit{${requests}} 100`,
        `headroom_remaining{${requests}} 40`,
        `headroom_used_ratio{${requests}} 0.6`,
        `headroom_status{${SERIES},status="ok"} 1`,
        `headroom_reports_total{${SERIES}} 12`,
        `headroom_provider_hints_total{${SERIES}} 2`,
        `headroom_cost_total{${SERIES}} 0.5`,
        "headroom_series_exported 1",
      ]),
    );
    const daily = api.asked.find((a) => /reports_daily/.test(a.query));
    expect(daily?.params).toEqual({ project: READ_PROJECT, day: "2030-06-15" });
  });

  it("answers OpenMetrics when Accept asks for it, and gzip when Accept-Encoding does", async () => {
    withOneSeries();
    const headers = {
      authorization: `Bearer ${keys.read}`,
      accept: "application/openmetrics-text; version=1.0.0",
      "accept-encoding": "gzip",
    };
    const res = await api.app.inject({ url: "/api/v1/metrics", headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/openmetrics-text/);
    expect(res.headers["content-encoding"]).toBe("gzip");
    const text = gunzipSync(res.rawPayload).toString();
    expect(text).toContain(`headroom_reports_total{${SERIES}} 12`);
    expect(text.trimEnd().endsWith("# EOF")).toBe(true);
    const identity = await api.app.inject({
      url: "/api/v1/metrics",
      headers: { ...headers, "accept-encoding": "gzip;q=0" },
    });
    expect(identity.headers["content-encoding"]).toBeUndefined();
  });

  it("refuses any parameter", async () => {
    api = fakeReadApi({ now: T });
    const res = await api.get("/api/v1/metrics?provider=openai");
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: "invalid_query" });
    expect(api.asked).toEqual([]);
  });

  it("needs a read key: none is 401, a report key is 403", async () => {
    api = fakeReadApi({ now: T });
    const none = await api.get("/api/v1/metrics", null);
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ error: "missing_project_key" });
    expect((await api.get("/api/v1/metrics", keys.report)).statusCode).toBe(403);
    expect(api.asked).toEqual([]);
  });
});
