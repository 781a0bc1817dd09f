import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createLogger } from "../../src/lib/logger.js";
import { REPORT_JOB } from "../../src/queue/reports-queue.js";
import { REPORT_COLUMNS } from "../../src/report/report-schema.js";
import { ROW_SHAPES } from "../../src/report/row-shapes.js";
import { usageRow } from "../helpers/alerts-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// What /api/v1/headroom and the exporter say "now" (src/alerts/now-model.ts), through HTTP with real
// Redis and ClickHouse, read by an API whose clock the test moves: the time to exhaustion counts
// down between two reads without a new report, the reset and the exhaustion share one clock, a
// window that has reset is no longer critical, what cannot be known is null with a reason, and a
// credit-only app's reports are no provider hints.

let s: ReadStack;
let k: ProjectKeys;
let api: Api;
/** The report times' origin: the real clock at the start (the edge checks timestamps). */
let T: number;
let clock: number;

const iso = (t: number) => new Date(t).toISOString();
const requests = (remaining: number, resetMs: number | null) => ({
  requests_limit: 500,
  requests_remaining: remaining,
  tokens_limit: null,
  tokens_remaining: null,
  reset_requests_ms: resetMs,
  reset_tokens_ms: null,
});

beforeAll(async () => {
  T = Math.floor(Date.now() / 1000) * 1000;
  clock = T;
  s = await startReadStack();
  k = await s.project();
  api = await createApi(s.p.config, createLogger("silent", "test"), {
    clickhouse: s.p.client,
    now: () => clock,
  });
  const sent = [
    // gpt-4o burns 2 requests/s: 60, 40, 20 left; out at T + 4 s; the window resets at T + 24 s.
    ...[60, 40, 20].map((remaining, i) => ({
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      timestamp: iso(T - 26_000 + i * 10_000),
      limits: requests(remaining, 30_000),
    })),
    // One report, and no reset time: nothing to say of a burn or an exhaustion.
    {
      provider: "mistral",
      model: "large",
      app: "chat",
      timestamp: iso(T - 5_000),
      limits: requests(450, null),
    },
    // An OpenRouter-style app: credits only.
    ...[0, 1, 2].map((i) => ({
      provider: "openrouter",
      model: "auto",
      app: "router",
      timestamp: iso(T - 30_000 + i * 10_000),
      limits: {},
      credits: { credits_limit: null, credits_remaining: 10 - i * 0.5, request_cost: 0.5 },
    })),
    // A real provider hint.
    { provider: "openrouter", model: null, app: "router", timestamp: iso(T - 40_000), limits: {} },
  ];
  await s.send(k.report, sent);
  await s.stored(k.project, sent.length);
});

afterAll(async () => {
  await api?.close();
  await s?.close();
});

async function headroomAt(at: number) {
  clock = at;
  const res = await api.app.inject({
    method: "GET",
    url: "/api/v1/headroom",
    headers: { authorization: `Bearer ${k.read}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json();
  expect(body.at).toBe(iso(at));
  const of = (provider: string) =>
    body.series.find(
      (x: { provider: string; model: string | null }) =>
        x.provider === provider && x.model !== null,
    );
  return { body, gpt: of("openai"), mistral: of("mistral"), router: of("openrouter") };
}

async function metricsAt(at: number) {
  clock = at;
  const res = await api.app.inject({
    method: "GET",
    url: "/api/v1/metrics",
    headers: { authorization: `Bearer ${k.read}`, accept: "text/plain" },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.body;
}

describe("/api/v1/headroom now", () => {
  it("counts the time to exhaustion down between two reads without a new report", async () => {
    // The hot copy has all three figures once the worker wrote them.
    await eventually(async () => expect((await headroomAt(T)).gpt.requests.remaining).toBe(20), {
      timeoutMs: 20_000,
    });
    const first = (await headroomAt(T + 1_000)).gpt.requests;
    const second = (await headroomAt(T + 3_000)).gpt.requests;
    expect(first.exhausted_at).toBe(iso(T + 4_000));
    expect(second.exhausted_at).toBe(iso(T + 4_000));
    expect(first.exhaustion_eta_s).toBe(3);
    expect(second.exhaustion_eta_s).toBe(1);
    expect(first.burn).toBe(2);
    expect(first.burn_unit).toBe("requests/s");
  });

  it("measures the exhaustion and the reset from the same at: near the reset, out is out", async () => {
    const v = (await headroomAt(T + 20_000)).gpt.requests;
    expect(v.resets_in_s).toBe(4);
    expect(v.exhaustion_eta_s).toBe(0);
    expect(v.exhaustion_unknown).toBeNull();
  });

  it("marks a window reset since its report, keeps its figures, and is no longer critical", async () => {
    expect((await headroomAt(T + 23_000)).gpt.status).toBe("critical");
    const { gpt } = await headroomAt(T + 60_000);
    expect(gpt.status).toBe("ok");
    expect(gpt.requests).toMatchObject({
      remaining: 20,
      used_pct: 96,
      reset_since_report: true,
      resets_in_s: 0,
      exhaustion_eta_s: null,
      exhaustion_unknown: "reset_since_report",
    });
    const text = await metricsAt(T + 60_000);
    const labels = 'provider="openai",model="gpt-4o",app="chat"';
    expect(text).toContain(`headroom_status{${labels},status="critical"} 0`);
    expect(text).toContain(
      `headroom_window_reset{${labels},kind="requests",dimension="requests",window="unknown"} 1`,
    );
    expect(text).not.toContain(`headroom_exhaustion_timestamp_seconds{${labels}`);
  });

  it("says why a figure is unknown: one report, no reset time", async () => {
    const { mistral } = await headroomAt(T + 1_000);
    expect(mistral.requests).toMatchObject({
      resets_at: null,
      resets_unknown: "no_reset_time",
      burn: null,
      burn_unknown: "too_few_reports",
      exhaustion_eta_s: null,
      exhaustion_unknown: "too_few_reports",
    });
  });

  it("burns a credit-only app's credits per hour", async () => {
    const { router } = await headroomAt(T);
    // 10 → 9 over 20 s: 180 credits/h; 9 left at T - 10 s.
    expect(router.credits).toMatchObject({ burn: 180, burn_unit: "credits/h" });
    expect(router.credits.exhausted_at).toBe(iso(T - 10_000 + 180_000));
    // /spend's burn and hours left are the same figures, at the same at.
    clock = T;
    const from = encodeURIComponent(iso(T - 3_600_000));
    const spend = await api.app.inject({
      method: "GET",
      url: `/api/v1/spend?from=${from}&provider=openrouter`,
      headers: { authorization: `Bearer ${k.read}` },
    });
    expect(spend.json().providers).toMatchObject([
      {
        provider: "openrouter",
        credits_remaining: 9,
        credits_burn_per_hour: 180,
        depleted_at: iso(T + 170_000),
        hours_until_depleted: Math.round((170 / 3600) * 100) / 100,
        hours_until_depleted_unknown: null,
      },
    ]);
  });
});

describe("a credit-only app's reports are no provider hints", () => {
  it("in /usage, /spend and the exporter's counters", async () => {
    const from = encodeURIComponent(iso(T - 3_600_000));
    const to = encodeURIComponent(iso(T + 3_600_000));
    const usage = await s.get(
      `/api/v1/usage?from=${from}&to=${to}&window=hour&group_by=provider&provider=openrouter`,
      k.read,
    );
    const points = usage.json().points as { reports: number; provider_hints: number }[];
    expect(points.reduce((n, p) => n + p.reports, 0)).toBe(4);
    expect(points.reduce((n, p) => n + p.provider_hints, 0)).toBe(1);
    const spend = await s.get(`/api/v1/spend?from=${from}&to=${to}&provider=openrouter`, k.read);
    expect(spend.json().providers).toMatchObject([{ provider: "openrouter", requests: 3 }]);
    // Today's counters: the reports may have landed on the day before (a run near midnight).
    const text = await metricsAt(T);
    const day = Math.floor(T / 86_400_000) * 86_400_000;
    if (T - 40_000 >= day) {
      expect(text).toContain(
        'headroom_provider_hints_total{provider="openrouter",model="auto",app="router"} 0',
      );
    }
  });
});

describe("rows stored before times were bounded", () => {
  it("a reset of 9e15 ms, or a 300-digit retry delay, reads as unknown: 200, never 500", async () => {
    const own = await s.project();
    const at = REPORT_COLUMNS.indexOf("reset_requests_ms");
    const tokensAt = REPORT_COLUMNS.indexOf("reset_tokens_ms");
    const headersAt = REPORT_COLUMNS.indexOf("headers");
    const errorAt = REPORT_COLUMNS.indexOf("error");
    const plain = usageRow(own.project, 95, { app: "plain" });
    plain[at] = 9e15;
    const azure = usageRow(own.project, 95, { provider: "azure", app: "retry" });
    azure[headersAt] = JSON.stringify({
      "x-ratelimit-remaining-tokens": "0",
      "retry-after-ms": "9".repeat(300),
    });
    const gemini = usageRow(own.project, 95, { provider: "gemini", app: "retry" });
    gemini[errorAt] = JSON.stringify({
      error: {
        details: [
          {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            violations: [{ quotaId: "GenerateRequestsPerMinute" }],
          },
          {
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            retryDelay: `${"9".repeat(300)}s`,
          },
        ],
      },
    });
    // No other reset: every window's reset is one of these.
    for (const row of [plain, azure, gemini]) row[tokensAt] = null;
    azure[at] = null;
    gemini[at] = null;
    // As the edge queued them before the bounds: the values stored as sent.
    await s.p.queue.add(REPORT_JOB, { v: ROW_SHAPES.current, rows: [plain, azure, gemini] });
    await s.stored(own.project, 3);
    clock = Date.now();
    const res = await api.app.inject({
      method: "GET",
      url: "/api/v1/headroom",
      headers: { authorization: `Bearer ${own.read}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    const series = res.json().series as {
      provider: string;
      requests: { resets_at: string | null };
      windows: { dimension: string; resets_at: string | null }[];
    }[];
    expect(series.map((x) => x.provider).sort()).toEqual(["azure", "gemini", "openai"]);
    for (const x of series) {
      expect(x.requests.resets_at).toBeNull();
      expect(x.windows.length).toBeGreaterThan(0);
      for (const w of x.windows) expect(w.resets_at).toBeNull();
    }
    const metrics = await api.app.inject({
      method: "GET",
      url: "/api/v1/metrics",
      headers: { authorization: `Bearer ${own.read}`, accept: "text/plain" },
    });
    expect(metrics.statusCode, metrics.body).toBe(200);
    expect(metrics.body).not.toMatch(/NaN|Inf/);
  });
});
