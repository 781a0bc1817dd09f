import { afterEach, describe, expect, it } from "vitest";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import { type FakeReadApi, fakeReadApi, keys, READ_PROJECT } from "../helpers/read-api-fakes.js";

// GET /api/v1/headroom through buildApiApp, on fakes of its store and key look-up: without a hot
// copy (each request reads the series from ClickHouse), the figures of each series through the
// model of now, the filters, its validation errors, and its scopes; with one (in memory), an
// answer shared while the copy's version stands, and a lost copy refilled from ClickHouse.

const T = Date.UTC(2030, 5, 15, 12, 0, 0);

/** A series' newest figures as latest_limits gives them (readHeadroom's first query). */
const latest = (over: Record<string, unknown> = {}) => ({
  provider: "openai",
  model: "gpt-4o",
  app: "chat-api",
  last_seen: String(T - 5_000),
  limits_at: String(T - 5_000),
  credits_at: null,
  requests_limit: "100",
  requests_remaining: "40",
  tokens_limit: "10000",
  tokens_remaining: "9000",
  reset_requests_ms: "30000",
  reset_tokens_ms: null,
  credits_limit: null,
  credits_remaining: null,
  ...over,
});

const LATEST = /last_seen, limits_at, credits_at/;

let api: FakeReadApi;
afterEach(async () => api?.app.close());

describe("GET /api/v1/headroom", () => {
  it("answers each series' figures through the model of now, in ClickHouse's order", async () => {
    api = fakeReadApi({ now: T });
    api.answer(LATEST, () => [
      latest({ provider: "openai" }),
      latest({ provider: "anthropic", requests_remaining: "5" }),
    ]);
    const res = await api.get("/api/v1/headroom");
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    const body = res.json();
    expect(body.at).toBe(new Date(T).toISOString());
    expect(body.series.map((s: { provider: string }) => s.provider)).toEqual([
      "anthropic",
      "openai",
    ]);
    const [anthropic, openai] = body.series;
    expect(openai).toMatchObject({
      model: "gpt-4o",
      app: "chat-api",
      status: "ok",
      last_seen: new Date(T - 5_000).toISOString(),
      reported_at: new Date(T - 5_000).toISOString(),
      credits_reported_at: null,
      requests: {
        limit: 100,
        remaining: 40,
        used_pct: 60,
        resets_at: new Date(T + 25_000).toISOString(),
        resets_in_s: 25,
        burn_unknown: "too_few_reports",
      },
      tokens: { limit: 10_000, remaining: 9_000, used_pct: 10, resets_unknown: "no_reset_time" },
      credits: { limit: null, remaining: null, burn_unknown: "no_figures" },
    });
    // 95 % used of requests: past the default thresholds' critical line (90 %).
    expect(anthropic).toMatchObject({ status: "critical", requests: { used_pct: 95 } });
    for (const a of api.asked) expect(a.params).toMatchObject({ project: READ_PROJECT });
  });

  it("keeps only the series its filters name, and asks ClickHouse with them", async () => {
    api = fakeReadApi({ now: T });
    api.answer(LATEST, () => [latest({ app: "chat-api" }), latest({ app: "batch" })]);
    const res = await api.get("/api/v1/headroom?app=batch");
    expect(res.statusCode).toBe(200);
    expect(res.json().series.map((s: { app: string }) => s.app)).toEqual(["batch"]);
    expect(JSON.stringify(api.asked[0]?.params)).toContain("batch");
  });

  it("answers no series and no pools for a project without reports", async () => {
    api = fakeReadApi({ now: T });
    const res = await api.get("/api/v1/headroom");
    expect(res.json()).toEqual({ at: new Date(T).toISOString(), series: [], pools: [] });
    const perApp = await api.get("/api/v1/headroom?group=app");
    expect(perApp.json()).toEqual({ at: new Date(T).toISOString(), series: [] });
    const perPool = await api.get("/api/v1/headroom?group=pool");
    expect(perPool.json()).toEqual({ at: new Date(T).toISOString(), pools: [] });
    expect((await api.get("/api/v1/headroom?group=org")).statusCode).toBe(400);
  });

  it("refuses a parameter it does not know", async () => {
    api = fakeReadApi({ now: T });
    for (const query of ["from=2030-06-15T00:00:00Z", "window=hour", "provider="]) {
      const res = await api.get(`/api/v1/headroom?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toMatchObject({ error: "invalid_query" });
    }
    expect(api.asked).toEqual([]);
  });

  it("is a 503 when ClickHouse cannot answer", async () => {
    api = fakeReadApi({ now: T });
    api.breakStore();
    const res = await api.get("/api/v1/headroom");
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: "unavailable" });
  });

  it("needs a read key: none is 401, a report key is 403", async () => {
    api = fakeReadApi({ now: T });
    const none = await api.get("/api/v1/headroom", null);
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ error: "missing_project_key" });
    expect((await api.get("/api/v1/headroom", keys.report)).statusCode).toBe(403);
    expect(api.asked).toEqual([]);
  });
});

/** A series as the hot copy keeps it: `remaining` requests of 100, reported 5 s before T. */
const hotSeries = (remaining: number): HotSeries => ({
  ls: T - 5_000,
  la: T - 5_000,
  li: "",
  l: ["100", String(remaining), null, null, null, null],
  p: {},
});
const FIELD = JSON.stringify(["openai", "gpt-4o", "chat-api"]);

describe("GET /api/v1/headroom with the hot copy", () => {
  const remaining = async () =>
    (await api.get("/api/v1/headroom"))
      .json()
      .series.map((s: { requests: { remaining: number } }) => s.requests.remaining);

  it("answers from the hot copy, shares the answer while its version stands, and not after", async () => {
    api = fakeReadApi({ now: T, shared: true });
    api.hot.set(READ_PROJECT, { version: 1, series: new Map([[FIELD, hotSeries(40)]]) });
    expect(await remaining()).toEqual([40]);
    // Changed under the same version (no write does that): the shared answer is still served.
    api.hot.get(READ_PROJECT)?.series.set(FIELD, hotSeries(30));
    expect(await remaining()).toEqual([40]);
    // A write moves the version on: the next answer is made from the copy.
    api.hot.set(READ_PROJECT, { version: 2, series: new Map([[FIELD, hotSeries(20)]]) });
    expect(await remaining()).toEqual([20]);
    expect(api.asked).toEqual([]);
  });

  it("refills a lost copy from ClickHouse, then answers from it without asking again", async () => {
    api = fakeReadApi({ now: T, shared: true });
    api.answer(LATEST, () => [latest()]);
    expect(await remaining()).toEqual([40]);
    expect(api.hot.get(READ_PROJECT)?.series.has(FIELD)).toBe(true);
    const asked = api.asked.length;
    expect(asked).toBeGreaterThan(0);
    expect(await remaining()).toEqual([40]);
    expect(api.asked).toHaveLength(asked);
  });
});
