import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { groupSeries } from "../../src/alerts/evaluate-batch.js";
import { evaluateSeries } from "../../src/alerts/evaluate-series.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import { headroomFamilies } from "../../src/api/metrics/families.js";
import { headroomResponse } from "../../src/api/schemas/headroom.js";
import { seriesView } from "../../src/headroom/headroom-view.js";
import {
  type HotSeries,
  hotFigures,
  hotUpdates,
  MAX_WINDOWS_PER_SERIES,
} from "../../src/headroom/hot-series.js";
import { mergeSeries } from "../../src/headroom/pool-view.js";
import type { DerivedWindows } from "../../src/providers/window.js";
import { type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";
import { BEDROCK_THROTTLING, GEMINI_FREE_TIER_DAY_429 } from "../fixtures/providers/documented.js";
import { groqLikeWindows } from "../helpers/groq-windows.js";

// The read side per window: a series' windows in the hot copy (newest figures per window, a
// window a newer report lacks keeps its own), the view (the model of now per window, the status
// the worst window's), the exporter (one sample per window, labelled), and the alerts (state and
// events per window: a day window critical while the minute window is fine).

const T0 = Date.UTC(2030, 0, 2, 12);
const MIN = 60_000;

function row(
  i: number,
  limits: {
    requests?: [number, number] | null;
    tokens?: [number, number] | null;
  },
  at = T0 + i * 1_000,
): ReportRow {
  const [rl, rr] = limits.requests ?? [null, null];
  const [tl, tr] = limits.tokens ?? [null, null];
  return toRow(
    toRecord(
      {
        provider: "groq",
        app: "chat",
        model: "llama",
        timestamp: at,
        limits: {
          requests_limit: rl,
          requests_remaining: rr,
          tokens_limit: tl,
          tokens_remaining: tr,
          reset_requests_ms: rl === null ? null : 6 * 3_600_000,
          reset_tokens_ms: tl === null ? null : 30_000,
        },
        credits: null,
      } as Parameters<typeof toRecord>[0],
      { reportId: uuidv7({ msecs: at }), projectId: "p", keyId: "k", receivedAt: at },
    ),
  );
}

function only(updates: Map<string, Map<string, HotSeries>>): { field: string; s: HotSeries } {
  const entries = [...(updates.get("p") ?? new Map<string, HotSeries>())];
  expect(entries).toHaveLength(1);
  const [field, s] = entries[0] as [string, HotSeries];
  return { field, s };
}

const series = (rows: ReportRow[]) => only(hotUpdates(rows, groqLikeWindows));

function view(rows: ReportRow[], now: number, staleAfterMs = 900_000) {
  const { field, s } = series(rows);
  const { latest, recent } = hotFigures(field, s, now - 300_000);
  return seriesView(latest, recent, [], { now, staleAfterMs });
}

/** Groq-like: 995 of 1000 requests used today (critical), 10 % of the minute's tokens (fine). */
const GROQ = [
  row(0, { requests: [1000, 10], tokens: [6000, 5400] }),
  row(10, { requests: [1000, 5], tokens: [6000, 5400] }),
];

describe("a series' windows", () => {
  it("lists each window, with its own figures, in dimension then length order", () => {
    const v = view(GROQ, T0 + 11_000);
    expect(v.windows.map((w) => [w.dimension, w.window, w.limit, w.remaining])).toEqual([
      ["requests", "1d", 1000, 5],
      ["tokens", "1m", 6000, 5400],
      ["tokens", "1d", 600_000, 540_000],
    ]);
    // The answer's schema holds it (the OpenAPI document and the page's types come from it).
    expect(headroomResponse.parse({ at: "x", series: [v] }).series?.[0]?.windows).toHaveLength(3);
  });

  it("gives the series the worst window's status: the day window critical, the minute fine", () => {
    const v = view(GROQ, T0 + 11_000);
    const [day, minute] = v.windows;
    expect(day?.used_pct).toBe(99.5);
    expect(minute?.used_pct).toBe(10);
    expect(v.status).toBe("critical");
    // Only the minute window: ok.
    expect(view([row(0, { tokens: [6000, 5400] })], T0 + 1_000).status).toBe("ok");
    // A newer report without the day window: the day window kept its figures and still makes the
    // series critical; the contract's requests say nothing, so the headline is that window.
    const kept = view([...GROQ, row(20, { tokens: [6000, 5400] })], T0 + 21_000);
    expect(kept.requests).toMatchObject({ remaining: 5, source: "stated", window: "1d" });
    expect(kept.status).toBe("critical");
  });

  it("reads each window through the model of now: resets count down, a reset window is not critical", () => {
    const at = T0 + 11_000;
    const v = view(GROQ, at);
    const [day, minute, tokensDay] = v.windows;
    expect(day?.resets_at).toBe(new Date(T0 + 10_000 + 6 * 3_600_000).toISOString());
    expect(day?.resets_in_s).toBe(6 * 3_600 - 1);
    expect(minute?.resets_in_s).toBe(29);
    expect(tokensDay?.resets_unknown).toBe("no_reset_time");
    // 100 % of the day's requests: used at 10 → 5 over 10 s, 0.5/s, gone in 10 s.
    expect(day?.burn_per_s).toBe(0.5);
    expect(day?.exhaustion_eta_s).toBe(9);
    // 40 s later the minute window has reset (its figures are the last window's); the day window
    // has not, and still decides the status.
    const later = view(GROQ, T0 + 50_000);
    expect(later.windows[1]?.reset_since_report).toBe(true);
    expect(later.windows[1]?.exhaustion_unknown).toBe("reset_since_report");
    expect(later.windows[0]?.reset_since_report).toBe(false);
    expect(later.status).toBe("critical");
    // The day window reset too: nothing is critical any more.
    expect(view(GROQ, T0 + 7 * 3_600_000, 86_400_000).status).toBe("ok");
  });

  it("keeps a window's last figures when a newer report does not carry it", () => {
    const rows = [
      row(0, { requests: [1000, 900], tokens: [6000, 3000] }),
      row(5, { tokens: [6000, 2000] }),
    ];
    const v = view(rows, T0 + 6_000);
    const byKey = new Map(v.windows.map((w) => [`${w.dimension}@${w.window}`, w]));
    expect(byKey.get("requests@1d")?.remaining).toBe(900);
    expect(byKey.get("requests@1d")?.reported_at).toBe(new Date(T0).toISOString());
    expect(byKey.get("tokens@1m")?.remaining).toBe(2000);
    expect(byKey.get("tokens@1m")?.reported_at).toBe(new Date(T0 + 5_000).toISOString());
    // The contract's fields are the newest report's, whole: they say nothing of requests, so the
    // headline is the kept window's.
    expect(v.requests).toMatchObject({ remaining: 900, source: "stated", window: "1d" });
  });

  it(`keeps at most ${MAX_WINDOWS_PER_SERIES} windows per series`, () => {
    const many = (): DerivedWindows => ({
      windows: Array.from({ length: 40 }, (_, i) => ({
        dimension: `d${i}`,
        window: null,
        limit: 10,
        remaining: 5,
        resets_at: null,
      })),
      warnings: [],
      parser: "test@1",
    });
    const { s } = only(hotUpdates([row(0, { tokens: [1, 1] })], many));
    expect(Object.keys(s.w ?? {})).toHaveLength(MAX_WINDOWS_PER_SERIES);
  });
});

describe("the exporter per window", () => {
  it("writes one sample per window, labelled with its dimension and window", () => {
    const v = view(GROQ, T0 + 11_000);
    const families = headroomFamilies({
      at: T0 + 11_000,
      series: [v],
      counters: new Map(),
      countersSince: 0,
      maxSeries: 10,
    });
    const used = families.find((f) => f.name === "headroom_used_ratio")?.samples ?? [];
    expect(used.map((s) => [s.labels.kind, s.labels.dimension, s.labels.window, s.value])).toEqual([
      ["requests", "requests", "1d", 0.995],
      ["tokens", "tokens", "1m", 0.1],
      ["tokens", "tokens", "1d", 0.1],
    ]);
    const critical = families
      .find((f) => f.name === "headroom_status")
      ?.samples.find((s) => s.labels.status === "critical");
    expect(critical?.value).toBe(1);
  });
});

describe("alerts per window", () => {
  const rule = (metric: "requests" | "tokens", window: AlertRule["window"] = null): AlertRule => ({
    id: `alr_${metric}${window ?? ""}`,
    project: "p",
    provider: null,
    model: null,
    app: null,
    metric,
    window,
    warn_pct: 70,
    critical_pct: 90,
    hysteresis_pct: 5,
    cooldown_s: 600,
    webhook: "http://127.0.0.1:1/hook",
    created_at: "2030-01-01T00:00:00.000Z",
  });

  const fire = (rules: AlertRule[], rows: ReportRow[]) =>
    groupSeries(rules, rows, groqLikeWindows).flatMap((g) =>
      evaluateSeries(g.rule, g.series, g.samples, null, g.window).events.map((e) => ({
        field: g.field,
        ...e,
      })),
    );

  it("fires for the critical day window only, and says which window", () => {
    const events = fire([rule("requests"), rule("tokens")], GROQ);
    expect(events.map((e) => [e.metric, e.window, e.level])).toEqual([
      ["requests", "1d", "critical"],
    ]);
    expect(events[0]?.field).toBe(JSON.stringify(["groq", "llama", "chat", "1d"]));
  });

  it("keeps a state per window: two windows of one dimension move apart", () => {
    // Tokens: the minute window at 95 %, the day window at 95 % too (× 100): both fire, with
    // distinct ids; a rule naming 1m watches only the minute window.
    const rows = [row(0, { tokens: [6000, 300] })];
    const both = fire([rule("tokens")], rows);
    expect(both.map((e) => e.window)).toEqual(["1m", "1d"]);
    expect(new Set(both.map((e) => e.id)).size).toBe(2);
    expect(fire([rule("tokens", "1m")], rows).map((e) => e.window)).toEqual(["1m"]);
    expect(fire([rule("tokens", "1h")], rows)).toEqual([]);
  });

  it("leaves a rule's state field and event ids as they were for a window of unknown length", () => {
    // The stub's windows (the contract's six fields): unknown length, the field of before.
    const groups = groupSeries([rule("requests")], GROQ);
    expect(groups.map((g) => [g.field, g.window])).toEqual([
      [JSON.stringify(["groq", "llama", "chat"]), null],
    ]);
  });

  it("does not count a minute later as a breach of the minute window (state per window)", () => {
    const rows = [
      row(0, { tokens: [6000, 300] }),
      row(90, { tokens: [6000, 5900] }, T0 + 1.5 * MIN),
    ];
    const events = fire([rule("tokens", "1m")], rows);
    expect(events.map((e) => [e.window, e.level])).toEqual([
      ["1m", "critical"],
      ["1m", "resolved"],
    ]);
  });
});

describe("where each window's figures come from", () => {
  // A derive that marks the day window learned (as a limit error's quota is: issue 45), the
  // minute window as parsers make it (no source: stated).
  const learnedDay = (s: Parameters<typeof groqLikeWindows>[0]): DerivedWindows => {
    const d = groqLikeWindows(s);
    return {
      ...d,
      windows: d.windows.map((w) =>
        w.dimension === "requests" && w.window === "1d" ? { ...w, source: "learned" } : w,
      ),
    };
  };

  it("keeps each window's source in the hot copy and says it in every view", () => {
    const now = T0 + 20_000;
    const s = only(hotUpdates(GROQ, learnedDay));
    const { latest, recent } = hotFigures(s.field, s.s, now - 300_000);
    const v = seriesView(latest, recent, [], { now, staleAfterMs: 900_000 });
    expect(v.windows.map((w) => [w.dimension, w.window, w.source])).toEqual([
      ["requests", "1d", "learned"],
      ["tokens", "1m", "stated"],
      ["tokens", "1d", "stated"],
    ]);
    // The answer's schema requires it, and refuses a source it does not know.
    expect(headroomResponse.safeParse({ at: "x", series: [v] }).success).toBe(true);
    const odd = { ...v, windows: [{ ...v.windows[0], source: "guessed" }] };
    expect(headroomResponse.safeParse({ at: "x", series: [odd] }).success).toBe(false);
    // The exporter: one info sample per window, labelled with its source.
    const family = headroomFamilies({
      at: now,
      series: [v],
      counters: new Map(),
      countersSince: T0,
      maxSeries: 10,
    }).find((f) => f.name === "headroom_window_source");
    expect(family?.samples.map((x) => [x.labels.window, x.labels.source, x.value])).toEqual([
      ["1d", "learned", 1],
      ["1m", "stated", 1],
      ["1d", "stated", 1],
    ]);
  });

  it("reads a window kept before sources, or a source it does not know, as stated", () => {
    const s = only(hotUpdates(GROQ, learnedDay));
    const w = s.s.w ?? {};
    for (const key of Object.keys(w)) w[key] = (w[key] as unknown[]).slice(0, 5) as never;
    w["requests@1d"] = [T0, "x", "1000", "5", null, "guessed" as never];
    const { latest } = hotFigures(s.field, s.s, T0);
    expect(latest.windows?.map((x) => x.source)).toEqual(["stated", "stated", "stated"]);
  });
});

/** A report of `provider` stating nothing in its limits, with an error body (or none). */
function said(
  provider: string,
  model: string | null,
  i: number,
  error: unknown = null,
  app = "chat",
  tokens: { limit: number; remaining: number } | null = null,
): ReportRow {
  return toRow(
    toRecord(
      {
        provider,
        app,
        model,
        timestamp: T0 + i * 1_000,
        limits: {
          requests_limit: null,
          requests_remaining: null,
          tokens_limit: tokens?.limit ?? null,
          tokens_remaining: tokens?.remaining ?? null,
          reset_requests_ms: null,
          reset_tokens_ms: null,
        },
        credits: null,
      } as Parameters<typeof toRecord>[0],
      {
        reportId: uuidv7({ msecs: T0 + i * 1_000 }),
        projectId: "p",
        keyId: "k",
        receivedAt: T0 + i * 1_000,
      },
      error === null ? undefined : { headers: null, error: JSON.stringify(error) },
    ),
  );
}

describe("a limit learned from a 429 (issue 45)", () => {
  const quota = (value?: string) => {
    const body = structuredClone(GEMINI_FREE_TIER_DAY_429);
    const v = body.error.details[0]?.violations?.[0] as { quotaValue?: string };
    if (value === undefined) delete v.quotaValue;
    else v.quotaValue = value;
    return body;
  };
  const dayWindow = (rows: ReportRow[], now: number) => {
    const { field, s } = only(hotUpdates(rows));
    const { latest, recent } = hotFigures(field, s, now - 300_000);
    return seriesView(latest, recent, [], { now, staleAfterMs: 900_000 }).windows.find(
      (w) => w.window === "1d",
    );
  };

  it("is remembered, with where it was learned, until a later statement changes it", () => {
    const first = said("gemini", "gemini-2.5-flash", 0, quota("250"));
    const firstId = String(first[0]);
    // The 429 itself: 250, used up until its retryDelay (22 s).
    expect(dayWindow([first], T0 + 1_000)).toMatchObject({
      limit: 250,
      remaining: 0,
      used_pct: 100,
      source: "learned",
      learned_from: { report_id: firstId, at: new Date(T0).toISOString() },
    });
    // A later 429 of the window that states no quota keeps the limit learned before.
    const later = said("gemini", "gemini-2.5-flash", 60, quota());
    expect(dayWindow([first, later], T0 + 61_000)).toMatchObject({
      limit: 250,
      remaining: 0,
      source: "learned",
      learned_from: { report_id: firstId },
    });
    // A later quota changes it.
    const raised = said("gemini", "gemini-2.5-flash", 120, quota("1000"));
    expect(dayWindow([raised, first, later], T0 + 121_000)).toMatchObject({
      limit: 1000,
      learned_from: { report_id: String(raised[0]) },
    });
  });

  it("is the pool's, whichever member learned it", () => {
    const a = said("gemini", "gemini-2.5-flash", 0, quota("250"), "a");
    const b = said("gemini", "gemini-2.5-flash", 5, quota(), "b");
    const members = [...(hotUpdates([a, b]).get("p") ?? new Map<string, HotSeries>()).values()];
    const pool = mergeSeries(members);
    expect(pool.lw).toEqual({ "requests@1d": [T0, String(a[0]), "250"] });
    expect(pool.w?.["requests@1d"]?.[1]).toBe(String(b[0]));
  });
});

describe("a rate limit that names no window (issue 45)", () => {
  /** A requests rule of any window, as a team would watch a pool's requests. */
  const rule: AlertRule = {
    id: "alr_req",
    project: "p",
    provider: null,
    model: null,
    app: null,
    metric: "requests",
    window: null,
    warn_pct: 70,
    critical_pct: 90,
    hysteresis_pct: 5,
    cooldown_s: 600,
    webhook: "http://127.0.0.1:1/hook",
    created_at: "2030-01-01T00:00:00.000Z",
  };
  const requestsEvents = (rows: ReportRow[]) =>
    groupSeries([rule], rows).flatMap(
      (g) => evaluateSeries(g.rule, g.series, g.samples, null, g.window).events,
    );
  // Bedrock's calls state nothing; its ThrottlingException names no window: the pool as a whole.
  const bedrock = (i: number, error: unknown = null, model: string | null = "claude-haiku") =>
    said("bedrock", model, i, error);
  const rows = [bedrock(0), bedrock(5, BEDROCK_THROTTLING), bedrock(20)];
  const view = (upTo: number, now: number) => {
    const { field, s } = only(hotUpdates(rows.slice(0, upTo)));
    const { latest, recent } = hotFigures(field, s, now - 300_000);
    return seriesView(latest, recent, [], { now, staleAfterMs: 900_000 });
  };

  it("shows the pool's requests used up (critical) until a later report that was not limited", () => {
    const during = view(2, T0 + 10_000);
    expect(during.status).toBe("critical");
    expect(during.windows.map((w) => [w.dimension, w.window, w.remaining, w.source])).toEqual([
      ["requests", null, 0, "stated"],
    ]);
    expect(view(1, T0 + 10_000)).toMatchObject({ status: "ok", windows: [] });
    expect(view(3, T0 + 25_000)).toMatchObject({ status: "ok", windows: [] });
  });

  it("fires the requests rule critical, and resolves it at the next report that was not limited", () => {
    const events = requestsEvents(rows);
    expect(events.map((e) => [e.window, e.level, e.used_pct, e.limit, e.remaining])).toEqual([
      [null, "critical", 100, 0, 0],
      [null, "resolved", 0, 0, 0],
    ]);
    // A provider hint (no model) says nothing of the pool.
    expect(groupSeries([rule], [bedrock(30, null, null)])).toEqual([]);
  });

  it("resolves at the next report that was not limited when reports state only token windows", () => {
    // A provider whose answers state tokens but no requests window (Mistral's older headers): a
    // 429 naming no window marks the pool, and the next report, tokens left, gives it room again.
    const tokensOnly = (i: number, error: unknown = null) =>
      said("mistral", "mistral-large", i, error, "chat", { limit: 1000, remaining: 500 });
    const limited = {
      error: { type: "rate_limit_error", message: "Requests rate limit exceeded" },
    };
    const rows = [tokensOnly(0), tokensOnly(5, { ...limited, status: 429 }), tokensOnly(20)];
    const events = requestsEvents(rows);
    expect(events.map((e) => [e.window, e.level])).toEqual([
      [null, "critical"],
      [null, "resolved"],
    ]);
  });
});
