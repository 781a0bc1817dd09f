import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { windowNow } from "../../src/alerts/now-model.js";
import { headroomFamilies } from "../../src/api/metrics/families.js";
import { type LatestFigures, seriesView } from "../../src/headroom/headroom-view.js";
import { hotFigures, hotUpdates, LIMIT_COLUMNS } from "../../src/headroom/hot-series.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";
import {
  latestOracle,
  nowReference,
  type RawRow,
  statusReference,
} from "../helpers/read-oracle.js";

// The model of "now" (now-model.ts) through a series' view: figures count down from the answer's
// `at`, one clock for the reset and the exhaustion, a reset window is no longer critical, and
// what cannot be known is null with a reason; and a seeded property (the project's fast-check
// seed) against the reference model in read-oracle.ts, through the hot copy's figures, the
// series view and the exporter.

const T = Date.UTC(2030, 5, 15, 18, 58, 45);
const opts = (now: number) => ({ now, staleAfterMs: 900_000 });

/** gpt-4o's requests: 500 a minute, resetting 60 s after the report, burning 10/s. */
function gpt4o(remaining: number, resetMs: number | null = 60_000): LatestFigures {
  return {
    provider: "openai",
    model: "gpt-4o",
    app: "chat",
    lastSeen: T,
    limitsAt: T,
    creditsAt: null,
    requests: { limit: 500, remaining, resetMs },
    tokens: { limit: null, remaining: null, resetMs: null },
    credits: { limit: null, remaining: null },
  };
}
const burning = (remaining: number, perS = 10) => ({
  requests: [
    [T - 10_000, remaining + 10 * perS],
    [T, remaining],
  ] as [number, number][],
  tokens: [],
  credits: [],
});

describe("the model of now", () => {
  it("counts the time to exhaustion down from the answer's at, not from the report", () => {
    const first = seriesView(gpt4o(200), burning(200), [], opts(T + 2_000)).requests;
    const later = seriesView(gpt4o(200), burning(200), [], opts(T + 12_000)).requests;
    expect(first.exhausted_at).toBe(new Date(T + 20_000).toISOString());
    expect(later.exhausted_at).toBe(first.exhausted_at);
    expect(first.exhaustion_eta_s).toBe(18);
    expect(later.exhaustion_eta_s).toBe(8);
    // Past the projected exhaustion: exhausted (0), not "in 1 s" for ever.
    expect(seriesView(gpt4o(200), burning(200), [], opts(T + 25_000)).requests).toMatchObject({
      exhaustion_eta_s: 0,
      exhaustion_unknown: null,
    });
  });

  it("uses one clock for the reset and the exhaustion: a series that ran out is not 'reset first'", () => {
    // Out at T + 20 s, reset at T + 60 s; read at T + 50 s, 10 s before the reset.
    const v = seriesView(gpt4o(200), burning(200), [], opts(T + 50_000)).requests;
    expect(v.resets_in_s).toBe(10);
    expect(v.exhaustion_eta_s).toBe(0);
    expect(v.exhaustion_unknown).toBeNull();
    // A window that resets before it would run out says so, with the reason.
    const slow = seriesView(gpt4o(450), burning(450, 1), [], opts(T + 1_000)).requests;
    expect(slow).toMatchObject({ exhaustion_eta_s: null, exhaustion_unknown: "resets_first" });
  });

  it("no longer counts a window that has reset since its last report as warning or critical", () => {
    const before = seriesView(gpt4o(20), burning(20), [], opts(T + 59_999));
    expect(before.status).toBe("critical");
    const after = seriesView(gpt4o(20), burning(20), [], opts(T + 60_000));
    expect(after.status).toBe("ok");
    expect(after.requests).toMatchObject({
      reset_since_report: true,
      // The last figures are kept for context.
      remaining: 20,
      used_pct: 96,
      resets_in_s: 0,
      exhaustion_eta_s: null,
      exhaustion_unknown: "reset_since_report",
    });
  });

  it("says unknown, with a reason, after one report and without a reset time", () => {
    const one = { requests: [[T, 200]] as [number, number][], tokens: [], credits: [] };
    expect(seriesView(gpt4o(200), one, [], opts(T + 1_000)).requests).toMatchObject({
      burn_per_s: null,
      burn_unknown: "too_few_reports",
      exhaustion_eta_s: null,
      exhaustion_unknown: "too_few_reports",
    });
    const noReset = seriesView(gpt4o(200, null), one, [], opts(T + 1_000)).requests;
    expect(noReset).toMatchObject({
      resets_at: null,
      resets_in_s: null,
      resets_unknown: "no_reset_time",
      exhaustion_unknown: "too_few_reports",
    });
    // No reset time, but burning: the time to exhaustion is known.
    const noResetBurning = seriesView(gpt4o(200, null), burning(200), [], opts(T)).requests;
    expect(noResetBurning).toMatchObject({ exhaustion_eta_s: 20, exhaustion_unknown: null });
    // Not falling: not burning.
    const flat = {
      requests: [
        [T - 10_000, 200],
        [T, 200],
      ] as [number, number][],
    };
    expect(
      seriesView(gpt4o(200), { ...flat, tokens: [], credits: [] }, [], opts(T)).requests,
    ).toMatchObject({ exhaustion_eta_s: null, exhaustion_unknown: "not_burning" });
  });

  it("gives one burn rate in its unit: credits per hour", () => {
    const credits = windowNow(
      "credits",
      { limit: 100, remaining: 40, reportedAt: T, resetsAt: null },
      [
        [T - 180_000, 40.1],
        [T, 40],
      ],
      T,
    );
    expect(credits).toMatchObject({ burn: 2, burn_unit: "credits/h", exhaustion_eta_s: 72_000 });
  });
});

/** DateTime64(3) text, as ClickHouse gives it. */
const chText = (t: number) => new Date(t).toISOString().replace("T", " ").slice(0, 23);
const col = (c: string) => REPORT_COLUMNS.indexOf(c as (typeof REPORT_COLUMNS)[number]);
const SERIES = [
  { provider: "openai", model: "gpt-4o", app: "chat", credits: false },
  { provider: "anthropic", model: "claude", app: "chat", credits: true },
  // An OpenRouter-style app: credits only, and hints.
  { provider: "openrouter", model: "auto", app: "router", credits: true, creditOnly: true },
] as const;

const step = fc.record({
  series: fc.integer({ min: 0, max: SERIES.length - 1 }),
  // Reports a second to ~7 minutes apart: bursts, and idle gaps longer than the burn's history.
  gapMs: fc.oneof(
    fc.integer({ min: 1_000, max: 20_000 }),
    fc.integer({ min: 1_000, max: 420_000 }),
  ),
  kind: fc.constantFrom("limits", "credits", "both", "hint"),
  requests: fc.integer({ min: 0, max: 100 }),
  tokens: fc.option(fc.integer({ min: 0, max: 10_000 })),
  resetRequestsMs: fc.option(fc.integer({ min: 1_000, max: 120_000 }), { freq: 4 }),
  resetTokensMs: fc.option(fc.integer({ min: 1_000, max: 600_000 })),
  // Binary fractions: exact in text and in a double.
  credits: fc.integer({ min: 0, max: 400 }).map((n) => n / 4),
});

type Step = typeof step extends fc.Arbitrary<infer S> ? S : never;

function rawRows(steps: Step[]): RawRow[] {
  const clocks = SERIES.map(() => T);
  return steps.map((s, i) => {
    const series = SERIES[s.series] as (typeof SERIES)[number];
    clocks[s.series] = (clocks[s.series] as number) + s.gapMs;
    const creditOnly = "creditOnly" in series;
    const kind = creditOnly && s.kind !== "hint" ? "credits" : s.kind;
    const limits = kind === "limits" || kind === "both";
    const credits = (kind === "credits" || kind === "both") && series.credits;
    return {
      provider: series.provider,
      model: series.model,
      app: series.app,
      t: clocks[s.series] as number,
      requests_limit: limits ? 100 : null,
      requests_remaining: limits ? s.requests : null,
      tokens_limit: limits && s.tokens !== null ? 10_000 : null,
      tokens_remaining: limits ? s.tokens : null,
      reset_requests_ms: limits ? s.resetRequestsMs : null,
      reset_tokens_ms: limits && s.tokens !== null ? s.resetTokensMs : null,
      credits_limit: credits ? 100 : null,
      credits_remaining: credits ? s.credits : null,
      cost: credits ? 0.25 : null,
      id: `r${String(i).padStart(4, "0")}`,
    };
  });
}

function reportRow(r: RawRow): ReportRow {
  const out: ReportRow = REPORT_COLUMNS.map(() => null);
  const text = (v: number | null) => (v === null ? null : String(v));
  out[col("report_id")] = r.id;
  out[col("project_id")] = "p";
  out[col("key_id")] = "k";
  out[col("app")] = r.app;
  out[col("provider")] = r.provider;
  out[col("model")] = r.model;
  out[col("timestamp")] = chText(r.t);
  out[col("received_at")] = chText(r.t);
  for (const c of LIMIT_COLUMNS) out[col(c)] = text(r[c]);
  out[col("credits_limit")] = r.credits_limit === null ? null : r.credits_limit.toFixed(12);
  out[col("credits_remaining")] =
    r.credits_remaining === null ? null : r.credits_remaining.toFixed(12);
  out[col("request_cost")] = r.cost === null ? null : r.cost.toFixed(12);
  return out;
}

describe("every view agrees with the reference model of now", () => {
  it("for any reports (windows, resets passing, idle gaps, hints, credit-only apps) and any at", () => {
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 1, maxLength: 30 }),
        // At: up to an hour before the last report (a client clock ahead) to two hours after.
        fc.array(fc.integer({ min: -3_600_000, max: 7_200_000 }), { minLength: 1, maxLength: 4 }),
        (steps, offsets) => {
          const rows = rawRows(steps);
          const hot = hotUpdates(rows.map(reportRow)).get("p") ?? new Map();
          const latest = latestOracle(rows);
          const lastT = Math.max(...rows.map((r) => r.t));
          for (const offset of offsets) {
            const at = lastT + offset;
            // As the read API reads its hot copy (queries/headroom.ts).
            const since = Math.floor(at / 1000) * 1000 - 300_000;
            const views = [...hot].map(([field, s]) => {
              const { latest: l, recent } = hotFigures(field, s, since);
              return seriesView(l, recent, [], { now: at, staleAfterMs: 900_000 });
            });
            for (const view of views) {
              const key = JSON.stringify([view.provider, view.model ?? "", view.app]);
              const o = latest.get(key);
              if (!o) throw new Error(`no reference for ${key}`);
              const own = rows
                .filter((r) => JSON.stringify([r.provider, r.model, r.app]) === key)
                .sort((a, b) => a.t - b.t);
              const pointsOf = (
                c: "requests_remaining" | "tokens_remaining" | "credits_remaining",
              ) =>
                own
                  .filter((r) => r[c] !== null && r.t >= since)
                  .map((r): [number, number] => [r.t, r[c] as number]);
              const limitsFig = (m: "requests" | "tokens") => ({
                limit: o.last?.[`${m}_limit`] ?? null,
                remaining: o.last?.[`${m}_remaining`] ?? null,
                t: o.last?.t ?? null,
                resetMs: o.last?.[`reset_${m}_ms`] ?? null,
              });
              const expected = {
                requests: nowReference(
                  "requests",
                  limitsFig("requests"),
                  pointsOf("requests_remaining"),
                  at,
                ),
                tokens: nowReference(
                  "tokens",
                  limitsFig("tokens"),
                  pointsOf("tokens_remaining"),
                  at,
                ),
                credits: nowReference(
                  "credits",
                  {
                    limit: o.credits?.credits_limit ?? null,
                    remaining: o.credits?.credits_remaining ?? null,
                    t: o.credits?.t ?? null,
                    resetMs: null,
                  },
                  pointsOf("credits_remaining"),
                  at,
                ),
              };
              expect(view.credits).toEqual(expected.credits);
              // The windows: each dimension's newest figures, kept when a newer report lacks them.
              const newestWith = (has: (r: (typeof own)[number]) => boolean) =>
                [...own].reverse().find(has);
              const windows = [];
              for (const m of ["requests", "tokens"] as const) {
                const r = newestWith(
                  (x) => x[`${m}_limit`] !== null || x[`${m}_remaining`] !== null,
                );
                if (!r) continue;
                const fig = {
                  limit: r[`${m}_limit`],
                  remaining: r[`${m}_remaining`],
                  t: r.t,
                  resetMs: r[`reset_${m}_ms`],
                };
                windows.push({
                  dimension: m,
                  window: null,
                  source: "stated",
                  learned_from: null,
                  resets: null,
                  reported_at: new Date(r.t).toISOString(),
                  ...nowReference(m, fig, pointsOf(`${m}_remaining`), at),
                });
              }
              const c = newestWith((x) => x.credits_limit !== null || x.credits_remaining !== null);
              if (c) {
                const fig = {
                  limit: c.credits_limit,
                  remaining: c.credits_remaining,
                  t: c.t,
                  resetMs: null,
                };
                windows.push({
                  dimension: "credits",
                  window: null,
                  source: "stated",
                  learned_from: null,
                  resets: null,
                  reported_at: new Date(c.t).toISOString(),
                  ...nowReference("credits", fig, pointsOf("credits_remaining"), at),
                });
              }
              expect(view.windows).toEqual(windows);
              // The headline requests and tokens: the newest report's contract figures, else (they
              // say nothing) the metric's window, which and where from said.
              const listed = windows.slice();
              const headline = (m: "requests" | "tokens") => {
                const own = expected[m];
                if (own.limit !== null || own.remaining !== null) return own;
                const w = listed.find((x) => x.dimension === m);
                if (!w) return own;
                const { learned_from: _l, resets: _r, reported_at: _a, ...view } = w;
                return view;
              };
              expect({ at, requests: view.requests }).toEqual({
                at,
                requests: headline("requests"),
              });
              expect(view.tokens).toEqual(headline("tokens"));
              // The status: the worst window's.
              const status = statusReference(windows, o.lastSeen, at);
              expect(view.status).toBe(status);
            }
            // The exporter: its exhaustion times and status gauges are the same model's.
            const families = headroomFamilies({
              at,
              series: views,
              counters: new Map(),
              countersSince: 0,
              maxSeries: 100,
            });
            const samples = (name: string) => families.find((f) => f.name === name)?.samples ?? [];
            for (const view of views.filter((v) => v.status !== "stale")) {
              const mine = (labels: Record<string, string>) =>
                labels.provider === view.provider && labels.app === view.app;
              for (const w of view.windows) {
                const exhaustion = samples("headroom_exhaustion_timestamp_seconds").find(
                  (s) =>
                    mine(s.labels) &&
                    s.labels.dimension === w.dimension &&
                    s.labels.window === (w.window ?? "unknown"),
                );
                const at = w.exhausted_at;
                expect(exhaustion?.value ?? null).toBe(at === null ? null : Date.parse(at) / 1000);
              }
              const critical = samples("headroom_status").find(
                (s) => mine(s.labels) && s.labels.status === "critical",
              );
              expect(critical?.value).toBe(view.status === "critical" ? 1 : 0);
            }
          }
        },
      ),
      { numRuns: 200 },
    );
    // A few seconds alone; room for a loaded 2-core machine.
  }, 60_000);
});
