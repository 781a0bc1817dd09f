import { afterEach, describe, expect, it } from "vitest";
import { type FakeReadApi, fakeReadApi, keys, READ_PROJECT } from "../helpers/read-api-fakes.js";

// GET /api/v1/alerts/events through buildApiApp, on fakes of its store and key look-up: the
// page of events, its level filter, its validation errors, and its scopes.

const T = Date.UTC(2030, 5, 15, 12, 0, 0);
const eventId = (n: number) => `evt_${n.toString(16).padStart(32, "0")}`;

/** An `alert_events` row as ClickHouse returns it. */
const row = (n: number) => ({
  id: eventId(n),
  rule_id: "rule_1",
  provider: "openai",
  model: "",
  app: "chat-api",
  metric: "requests",
  dimension: "requests",
  window: "1d",
  level: "critical",
  used_pct: 95,
  limit: 500,
  remaining: 25,
  reset_ms: "12000",
  burn_per_s: null,
  exhaustion_eta_s: null,
  warn_pct: 80,
  critical_pct: 90,
  report_id: "0190a000-0000-7000-8000-000000000001",
  t: String(T - n * 1_000),
});

let api: FakeReadApi;
afterEach(async () => api?.app.close());

describe("GET /api/v1/alerts/events", () => {
  it("answers the project's events newest first, filtered by level", async () => {
    api = fakeReadApi({ now: T });
    api.answer(/FROM fake\.alert_events FINAL/, () => [row(1), row(2)]);
    const res = await api.get("/api/v1/alerts/events?level=critical&level=warning&limit=1");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.items).toEqual([
      {
        ...Object.fromEntries(Object.entries(row(1)).filter(([k]) => k !== "t")),
        model: null,
        reset_ms: 12000,
        at: new Date(T - 1_000).toISOString(),
      },
    ]);
    expect(body.next_cursor).toEqual(expect.any(String));
    expect(api.asked[0]?.query).toMatch(/toString\(level\) IN \{levels:Array\(String\)\}/);
    expect(api.asked[0]?.params).toMatchObject({
      project: READ_PROJECT,
      levels: ["critical", "warning"],
      limit: 2,
    });
  });

  it("refuses a level it does not know, a filter it does not take and a bad cursor", async () => {
    api = fakeReadApi({ now: T });
    for (const query of ["level=info", "model=gpt-4o", "app=x", "cursor=!"]) {
      const res = await api.get(`/api/v1/alerts/events?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toMatchObject({ error: "invalid_query" });
    }
    expect(api.asked).toEqual([]);
  });

  it("needs a read key: a bad one is 401, a report key is 403", async () => {
    api = fakeReadApi({ now: T });
    expect((await api.get("/api/v1/alerts/events", "hr_nonsense")).json()).toMatchObject({
      error: "invalid_project_key",
    });
    expect((await api.get("/api/v1/alerts/events", keys.report)).statusCode).toBe(403);
    expect(api.asked).toEqual([]);
  });
});
