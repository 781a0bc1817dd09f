import { afterEach, describe, expect, it } from "vitest";
import { type FakeReadApi, fakeReadApi, keys, READ_PROJECT } from "../helpers/read-api-fakes.js";

// GET /api/v1/reports through buildApiApp, on fakes of its store and key look-up: the page it
// answers, the cursor it hands out and takes back, its validation errors, and its scopes.

const T = Date.UTC(2030, 5, 15, 12, 0, 0);
const id = (n: number) => `0190a000-0000-7000-8000-${String(n).padStart(12, "0")}`;

/** A `reports` row as ClickHouse returns it (Int64 as text, Decimal as a number). */
const row = (n: number, credits = false) => ({
  id: id(n),
  app: "chat-api",
  provider: "openai",
  model: n % 2 === 0 ? "" : "gpt-4o-mini",
  t: String(T - n * 1_000),
  r: String(T - n * 1_000 + 5),
  requests_limit: "500",
  requests_remaining: String(500 - n),
  tokens_limit: null,
  tokens_remaining: null,
  reset_requests_ms: "1000",
  reset_tokens_ms: null,
  credits_limit: credits ? 100 : null,
  credits_remaining: credits ? 42.5 : null,
  request_cost: null,
  // The windows stored with it (here the legacy ones of its limits) and no error body.
  w_dimension: ["requests"],
  w_parser: "limits@1",
  w_window: [null],
  w_limit: [500],
  w_remaining: [500 - n],
  w_resets_at: [String(T - n * 1_000 + 1000)],
  error: null,
});

let api: FakeReadApi;
afterEach(async () => api?.app.close());

describe("GET /api/v1/reports", () => {
  it("answers a page of the project's reports, newest first, with the cursor of the next", async () => {
    api = fakeReadApi({ now: T });
    // One row more than the page: there is a next page.
    api.answer(/FROM fake\.reports FINAL/, (p) =>
      [1, 2, 3].slice(0, Number(p.limit)).map((n) => row(n, n === 1)),
    );
    const res = await api.get("/api/v1/reports?limit=2&provider=openai");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.items).toEqual([
      {
        id: id(1),
        app: "chat-api",
        provider: "openai",
        model: "gpt-4o-mini",
        timestamp: new Date(T - 1_000).toISOString(),
        received_at: new Date(T - 995).toISOString(),
        limits: {
          requests_limit: 500,
          requests_remaining: 499,
          tokens_limit: null,
          tokens_remaining: null,
          reset_requests_ms: 1000,
          reset_tokens_ms: null,
        },
        credits: { credits_limit: 100, credits_remaining: 42.5, request_cost: null },
        windows: [
          {
            dimension: "requests",
            window: null,
            source: "stated",
            limit: 500,
            remaining: 499,
            used_pct: 0.2,
            resets_at: new Date(T).toISOString(),
          },
        ],
        error: null,
      },
      expect.objectContaining({ id: id(2), model: null, credits: null }),
    ]);
    expect(body.next_cursor).toEqual(expect.any(String));
    // The project is the key's; the filter and the page size reach the query as parameters.
    expect(api.asked[0]?.params).toMatchObject({ project: READ_PROJECT, limit: 3 });
    expect(JSON.stringify(api.asked[0]?.params)).toContain("openai");

    // The cursor asks for the rows after the page's last one.
    const next = await api.get(`/api/v1/reports?limit=2&cursor=${body.next_cursor}`);
    expect(next.statusCode).toBe(200);
    expect(api.asked[1]?.query).toMatch(/\(timestamp, toString\(report_id\)\) </);
    expect(api.asked[1]?.params).toMatchObject({ cid: id(2) });
  });

  it("answers an empty page without a cursor", async () => {
    api = fakeReadApi({ now: T });
    const res = await api.get("/api/v1/reports");
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ items: [], next_cursor: null });
  });

  it("refuses a query it does not know, a limit out of range and a cursor it did not give", async () => {
    api = fakeReadApi({ now: T });
    for (const query of ["colour=red", "limit=0", "limit=101", "cursor=abc", "from=yesterday"]) {
      const res = await api.get(`/api/v1/reports?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toMatchObject({ error: "invalid_query" });
    }
    expect(api.asked).toEqual([]);
  });

  it("needs a read key: none is 401, a report key is 403, the read limit is 429", async () => {
    api = fakeReadApi({ now: T });
    expect((await api.get("/api/v1/reports", null)).statusCode).toBe(401);
    const report = await api.get("/api/v1/reports", keys.report);
    expect(report.statusCode).toBe(403);
    expect(report.json()).toMatchObject({ error: "insufficient_scope" });
    api.closeReadLimit();
    const limited = await api.get("/api/v1/reports");
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: "rate_limited", limit: 1, remaining: 0 });
    expect(api.asked).toEqual([]);
  });

  it("answers 503 when the store cannot answer", async () => {
    api = fakeReadApi({ now: T });
    api.breakStore();
    const res = await api.get("/api/v1/reports");
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: "unavailable" });
  });
});
