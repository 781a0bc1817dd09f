import { afterEach, describe, expect, it } from "vitest";
import { type FakeReadApi, fakeReadApi, keys, READ_PROJECT } from "../helpers/read-api-fakes.js";

// GET /api/v1/usage through buildApiApp, on fakes of its store and key look-up: the points of a
// range, the rollup and window it reads, each point's worst % used per dimension, CSV by
// `format` or `Accept`, the cap on points, its validation errors, and its scopes.

const H = 3_600_000;
const T = Date.UTC(2030, 5, 15, 12, 0, 0);

/** A rollup row as usageSql gives it. */
const row = (over: Record<string, unknown> = {}) => ({
  bucket: "2030-06-15 10:00:00",
  reports: "12",
  hints: "2",
  rr_min: "40",
  tr_min: null,
  rl_max: "100",
  tl_max: null,
  used_pct_max: 60.004,
  cost: 0.25,
  credits_last: null,
  ...over,
});

const ROLLUP = /FROM fake\.reports_minute/;

let api: FakeReadApi;
afterEach(async () => api?.app.close());

describe("GET /api/v1/usage", () => {
  it("answers the points of a range, each with its worst % used per dimension", async () => {
    api = fakeReadApi({ now: T });
    // One row per point, the windows' worst % per dimension joined in (a map from ClickHouse).
    api.answer(ROLLUP, () => [
      row({ provider: "openai", dims: { requests: 60.004, tokens: 12.5 } }),
      row({
        provider: "anthropic",
        bucket: "2030-06-15 11:00:00",
        rr_min: null,
        rl_max: null,
        dims: {},
      }),
    ]);
    const from = new Date(T - 3 * H).toISOString();
    const res = await api.get(`/api/v1/usage?from=${from}&window=hour&group_by=provider`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      from,
      to: new Date(T).toISOString(),
      window: "hour",
      group_by: ["provider"],
      points: [
        {
          bucket: "2030-06-15T10:00:00.000Z",
          provider: "openai",
          reports: 12,
          provider_hints: 2,
          requests_remaining_min: 40,
          tokens_remaining_min: null,
          requests_limit_max: 100,
          tokens_limit_max: null,
          used_pct_max: 60,
          cost: 0.25,
          credits_remaining_last: null,
          used_pct_by_dimension: { requests: 60, tokens: 12.5 },
        },
        expect.objectContaining({
          bucket: "2030-06-15T11:00:00.000Z",
          provider: "anthropic",
          requests_remaining_min: null,
          used_pct_by_dimension: {},
        }),
      ],
    });
    expect(api.asked).toHaveLength(1);
    const [asked] = api.asked;
    expect(asked?.params).toMatchObject({ project: READ_PROJECT, from: "2030-06-15 09:00:00" });
    expect(asked?.query).toMatch(/toStartOfHour/);
    expect(asked?.query).toMatch(/LEFT JOIN[\s\S]*FROM fake\.report_windows_minute/);
  });

  it("reads the daily rollups for a day window, and a model without a name is null", async () => {
    api = fakeReadApi({ now: T });
    api.answer(/FROM fake\.reports_daily/, () => [row({ bucket: "2030-06-14", model: "" })]);
    const from = new Date(T - 3 * 24 * H).toISOString();
    const res = await api.get(`/api/v1/usage?from=${from}&window=day&group_by=model`);
    expect(res.statusCode).toBe(200);
    expect(res.json().points).toEqual([
      expect.objectContaining({ bucket: "2030-06-14T00:00:00.000Z", model: null }),
    ]);
    expect(api.asked[0]?.params).toMatchObject({ from: "2030-06-12" });
  });

  it("answers CSV for format=csv and for Accept: text/csv, without the nested column", async () => {
    api = fakeReadApi({ now: T });
    api.answer(ROLLUP, () => [row({ provider: "openai" })]);
    const from = new Date(T - 3 * H).toISOString();
    const url = `/api/v1/usage?from=${from}&window=hour&group_by=provider`;
    const expected = [
      "bucket,provider,reports,provider_hints,requests_remaining_min,tokens_remaining_min,requests_limit_max,tokens_limit_max,used_pct_max,cost,credits_remaining_last",
      "2030-06-15T10:00:00.000Z,openai,12,2,40,,100,,60,0.25,",
    ];
    for (const res of [
      await api.get(`${url}&format=csv`),
      await api.app.inject({
        url,
        headers: { authorization: `Bearer ${keys.read}`, accept: "text/csv" },
      }),
    ]) {
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toBe("text/csv; charset=utf-8");
      expect(res.body.trim().split(/\r?\n/)).toEqual(expected);
    }
    const json = await api.app.inject({
      url: `${url}&format=json`,
      headers: { authorization: `Bearer ${keys.read}`, accept: "text/csv" },
    });
    expect(json.headers["content-type"]).toMatch(/^application\/json/);
  });

  it("refuses a query that would return more points than READ_MAX_POINTS, never cut short", async () => {
    api = fakeReadApi({ now: T, env: { READ_MAX_POINTS: "2" } });
    api.answer(ROLLUP, () => [row(), row(), row()]);
    const res = await api.get(`/api/v1/usage?from=${new Date(T - 3 * H).toISOString()}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: "invalid_query" });
    expect(res.json().message).toMatch(/more than 2 points/);
    expect(api.asked[0]?.params).toMatchObject({ limit: 3 });
  });

  it("refuses a window, a format, a group or a parameter it does not know", async () => {
    api = fakeReadApi({ now: T });
    for (const query of ["window=week", "format=xml", "group_by=key", "limit=5", "from=soon"]) {
      const res = await api.get(`/api/v1/usage?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toMatchObject({ error: "invalid_query" });
    }
    expect(api.asked).toEqual([]);
  });

  it("needs a read key: none is 401, a report key is 403", async () => {
    api = fakeReadApi({ now: T });
    const none = await api.get("/api/v1/usage", null);
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ error: "missing_project_key" });
    expect((await api.get("/api/v1/usage", keys.report)).statusCode).toBe(403);
    expect(api.asked).toEqual([]);
  });
});

describe("GET /api/v1/usage over the last 24 h, shared", () => {
  it("reads once for callers asking alike, and answers CSV from the shared answer too", async () => {
    api = fakeReadApi({ now: T, shared: true });
    api.answer(ROLLUP, () => [row({ provider: "openai", bucket: "2030-06-15 11:00:00" })]);
    const url = "/api/v1/usage?window=hour&group_by=provider";
    const first = await api.get(url);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({
      from: new Date(T - 24 * H).toISOString(),
      to: new Date(T).toISOString(),
      points: [{ bucket: "2030-06-15T11:00:00.000Z", provider: "openai", reports: 12 }],
    });
    const asked = api.asked.length;
    expect((await api.get(url)).body).toBe(first.body);
    const csv = await api.get(`${url}&format=csv`);
    expect(csv.headers["content-type"]).toBe("text/csv; charset=utf-8");
    expect(csv.body.trim().split(/\r?\n/)[1]).toBe(
      "2030-06-15T11:00:00.000Z,openai,12,2,40,,100,,60,0.25,",
    );
    // The CSV asks alike too (format is not part of what is shared).
    expect(api.asked).toHaveLength(asked);
  });
});
