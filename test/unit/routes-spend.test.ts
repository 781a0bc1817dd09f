import { afterEach, describe, expect, it } from "vitest";
import { type FakeReadApi, fakeReadApi, keys, READ_PROJECT } from "../helpers/read-api-fakes.js";

// GET /api/v1/spend through buildApiApp, on fakes of its store and key look-up: the figures per
// provider, the rollup a range reads, its validation errors, and its scopes.

const H = 3_600_000;
const T = Date.UTC(2030, 5, 15, 12, 0, 0);

let api: FakeReadApi;
afterEach(async () => api?.app.close());

describe("GET /api/v1/spend", () => {
  it("answers per provider the cost, the requests and the cost per hour over the range", async () => {
    api = fakeReadApi({ now: T });
    api.answer(/FROM fake\.reports_minute/, () => [
      { provider: "anthropic", cost: 1.5, requests: "30", credits_last: null },
      { provider: "openai", cost: 12, requests: "120", credits_last: null },
    ]);
    const from = new Date(T - 6 * H).toISOString();
    const res = await api.get(`/api/v1/spend?from=${from}&app=chat-api`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      from,
      to: new Date(T).toISOString(),
      providers: [
        {
          provider: "anthropic",
          cost: 1.5,
          requests: 30,
          burn_per_hour: 0.25,
          credits_remaining: null,
          credits_burn_per_hour: null,
          credits_burn_unknown: "no_figures",
          depleted_at: null,
          hours_until_depleted: null,
          hours_until_depleted_unknown: "no_figures",
        },
        expect.objectContaining({ provider: "openai", cost: 12, requests: 120, burn_per_hour: 2 }),
      ],
    });
    expect(api.asked).toHaveLength(1);
    expect(api.asked[0]?.params).toMatchObject({ project: READ_PROJECT });
    expect(JSON.stringify(api.asked[0]?.params)).toContain("chat-api");
  });

  it("reads the daily rollups for a range longer than the minute rollups keep", async () => {
    api = fakeReadApi({ now: T });
    const res = await api.get(`/api/v1/spend?from=${new Date(T - 30 * 24 * H).toISOString()}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().providers).toEqual([]);
    expect(api.asked[0]?.query).toMatch(/FROM fake\.reports_daily/);
  });

  it("refuses a parameter it does not know and a range that ends before it starts", async () => {
    api = fakeReadApi({ now: T });
    const to = new Date(T - H).toISOString();
    for (const query of ["limit=5", `from=${new Date(T).toISOString()}&to=${to}`, "to=soon"]) {
      const res = await api.get(`/api/v1/spend?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toMatchObject({ error: "invalid_query" });
    }
    expect(api.asked).toEqual([]);
  });

  it("needs a read key: none is 401, a report key is 403", async () => {
    api = fakeReadApi({ now: T });
    expect((await api.get("/api/v1/spend", null)).json()).toMatchObject({
      error: "missing_project_key",
    });
    expect((await api.get("/api/v1/spend", keys.report)).statusCode).toBe(403);
    expect(api.asked).toEqual([]);
  });
});
