import fc from "fast-check";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { evaluateBatch, type SeriesFailure } from "../../src/alerts/evaluate-batch.js";
import {
  BURN_UNITS,
  UNKNOWN_REASONS,
  type WindowNow,
  windowNow,
} from "../../src/alerts/now-model.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import type { StateStore } from "../../src/alerts/state-store.js";
import { writeExposition } from "../../src/api/metrics/exposition.js";
import { headroomFamilies } from "../../src/api/metrics/families.js";
import { headroomResponse } from "../../src/api/schemas/headroom.js";
import { type LatestFigures, seriesView } from "../../src/headroom/headroom-view.js";
import { hotFigures, hotUpdates } from "../../src/headroom/hot-series.js";
import { REPORT_COLUMNS, type ReportRow } from "../../src/report/report-schema.js";

// Issue 42: the model of now, the alerts' evaluation and the exporter fed hostile figures — huge,
// negative, NaN-like text, far past and far future times — never throw, and every output is in
// its documented range (now-model.ts): figures finite or null, used_pct ≥ 0, times ISO text
// within 1970–2299 or null, seconds finite and ≥ 0, exported samples finite, the used ratio in
// [0, 1], and /api/v1/headroom's answer its schema's. Seeded by the project's fast-check seed.

const MAX_TIME_MS = Date.UTC(2299, 11, 31, 23, 59, 59, 999);
const YEAR_MS = 31_536_000_000;
const NOW = Date.UTC(2026, 10, 29, 12);

const hugeNumber = fc.constantFrom(
  9e15,
  -9e15,
  8.64e15 + 1,
  -8.64e15 - 1,
  1e300,
  -1e300,
  2 ** 63,
  -(2 ** 63),
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  Number.MIN_VALUE,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  YEAR_MS + 1,
  -0,
);
/** Any number, the hostile ones often. */
const number = fc.oneof(hugeNumber, fc.double(), fc.integer(), fc.nat({ max: 2_000 }));
/** A time: far past, far future, or around now. */
const time = fc.oneof(
  number,
  fc.integer({ min: NOW - 3_600_000, max: NOW + 3_600_000 }),
  fc.integer({ min: -8.64e15, max: 8.64e15 }),
);
/** What ClickHouse or Redis could hand back as a figure's text. */
const text = fc.oneof(
  number.map(String),
  fc.constantFrom("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "abc", "", " ", "0x10"),
  fc.constant("9".repeat(300)),
  fc.string({ maxLength: 8 }),
);
const orNull = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
const points = fc.array(fc.tuple(time, number), { maxLength: 6 });

function expectTime(iso: string | null) {
  if (iso === null) return;
  const ms = Date.parse(iso);
  expect(ms).toBeGreaterThanOrEqual(0);
  expect(ms).toBeLessThanOrEqual(MAX_TIME_MS);
}
const finiteOrNull = (n: number | null) => n === null || Number.isFinite(n);
const secondsOrNull = (n: number | null) => n === null || (Number.isFinite(n) && n >= 0);

function expectInRange(w: WindowNow) {
  expect(finiteOrNull(w.limit) && finiteOrNull(w.remaining)).toBe(true);
  expect(w.used_pct === null || (Number.isFinite(w.used_pct) && w.used_pct >= 0)).toBe(true);
  expectTime(w.resets_at);
  expectTime(w.exhausted_at);
  expect(secondsOrNull(w.resets_in_s) && secondsOrNull(w.exhaustion_eta_s)).toBe(true);
  expect(finiteOrNull(w.burn) && finiteOrNull(w.burn_per_s)).toBe(true);
  expect(Object.values(BURN_UNITS)).toContain(w.burn_unit);
  for (const why of [w.resets_unknown, w.burn_unknown, w.exhaustion_unknown])
    expect(why === null || UNKNOWN_REASONS.includes(why)).toBe(true);
}

describe("hostile figures", () => {
  it("the model of now never throws, and answers within its documented range", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("requests", "tokens", "credits" as const),
        fc.record({
          limit: orNull(number),
          remaining: orNull(number),
          reportedAt: orNull(time),
          resetsAt: orNull(time),
        }),
        points,
        time,
        (metric, fig, pts, at) => expectInRange(windowNow(metric, fig, pts, at)),
      ),
      { numRuns: 2_000 },
    );
  });

  it("the headroom view and the exporter never throw; the answer is its schema's, every sample finite", () => {
    const metric = fc.record({
      limit: orNull(number),
      remaining: orNull(number),
      resetMs: orNull(number),
    });
    const latest: fc.Arbitrary<LatestFigures> = fc.record({
      provider: fc.constant("openai"),
      model: fc.constantFrom("gpt-4o", ""),
      app: fc.constant("chat"),
      lastSeen: time,
      limitsAt: orNull(time),
      creditsAt: orNull(time),
      requests: metric,
      tokens: metric,
      credits: fc.record({ limit: orNull(number), remaining: orNull(number) }),
      windows: fc.array(
        fc.record({
          dimension: fc.constantFrom("requests", "tokens", "input_tokens", "credits"),
          window: fc.constantFrom(null, "1m" as const, "1d" as const),
          limit: orNull(number),
          remaining: orNull(number),
          reportedAt: time,
          resetsAt: orNull(time),
          points,
        }),
        { maxLength: 3 },
      ),
    });
    fc.assert(
      fc.property(
        fc.array(latest, { minLength: 1, maxLength: 3 }),
        fc.record({ requests: points, tokens: points, credits: points }),
        time,
        (all, recent, now) => {
          const series = all.map((l) => seriesView(l, recent, [], { now, staleAfterMs: 900_000 }));
          for (const s of series) {
            for (const w of [s.requests, s.tokens, s.credits, ...s.windows]) expectInRange(w);
            expectTime(s.last_seen);
          }
          expect(
            headroomResponse.safeParse({ at: new Date(NOW).toISOString(), series }).success,
          ).toBe(true);
          const families = headroomFamilies({
            at: now,
            series,
            counters: new Map(),
            countersSince: NOW,
            maxSeries: 10,
          });
          for (const f of families)
            for (const sample of f.samples) {
              expect(Number.isFinite(sample.value), f.name).toBe(true);
              if (f.name === "headroom_used_ratio") {
                expect(sample.value).toBeGreaterThanOrEqual(0);
                expect(sample.value).toBeLessThanOrEqual(1);
              }
              if (f.name.endsWith("_timestamp_seconds")) {
                expect(sample.value).toBeGreaterThanOrEqual(0);
                expect(sample.value).toBeLessThanOrEqual(MAX_TIME_MS / 1000);
              }
            }
          for (const format of ["text", "openmetrics"] as const)
            expect(writeExposition(families, format)).not.toMatch(/NaN|Inf/);
        },
      ),
      { numRuns: 500 },
    );
  });

  const col = (c: string) => REPORT_COLUMNS.indexOf(c as (typeof REPORT_COLUMNS)[number]);
  const chTime = (ms: number) => {
    const iso = new Date(Math.min(Math.max(ms, 0), MAX_TIME_MS)).toISOString();
    return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
  };
  /** A stored row as ClickHouse could give it: any figure text, times far off, any headers. */
  const row = (project: string) =>
    fc
      .record({
        t: fc.oneof(
          fc.integer({ min: NOW - 600_000, max: NOW }),
          fc.integer({ min: 0, max: MAX_TIME_MS }),
        ),
        requestsLimit: orNull(text),
        requestsRemaining: orNull(text),
        tokensLimit: orNull(text),
        tokensRemaining: orNull(text),
        resetRequests: orNull(text),
        resetTokens: orNull(text),
        retry: fc.option(text, { nil: undefined }),
      })
      .map((r): ReportRow => {
        const out: ReportRow = REPORT_COLUMNS.map(() => null);
        out[col("report_id")] = uuidv7();
        out[col("project_id")] = project;
        out[col("key_id")] = "k";
        out[col("app")] = "chat";
        out[col("provider")] = r.retry === undefined ? "openai" : "azure";
        out[col("model")] = "gpt-4o";
        out[col("timestamp")] = chTime(r.t);
        out[col("received_at")] = chTime(r.t);
        out[col("requests_limit")] = r.requestsLimit;
        out[col("requests_remaining")] = r.requestsRemaining;
        out[col("tokens_limit")] = r.tokensLimit;
        out[col("tokens_remaining")] = r.tokensRemaining;
        out[col("reset_requests_ms")] = r.resetRequests;
        out[col("reset_tokens_ms")] = r.resetTokens;
        if (r.retry !== undefined)
          out[col("headers")] = JSON.stringify({
            "x-ratelimit-remaining-tokens": "0",
            "retry-after-ms": r.retry,
          });
        return out;
      });

  it("the hot copy of hostile rows reads back through the view within range", () => {
    fc.assert(
      fc.property(fc.array(row("p"), { minLength: 1, maxLength: 8 }), time, (rows, now) => {
        for (const [field, s] of hotUpdates(rows).get("p") ?? new Map()) {
          const { latest, recent } = hotFigures(field, s, NOW - 300_000);
          const view = seriesView(latest, recent, [], { now, staleAfterMs: 900_000 });
          for (const w of [view.requests, view.tokens, view.credits, ...view.windows])
            expectInRange(w);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("the alerts' evaluation never throws nor fails a series; every event is within range", async () => {
    const rule = (project: string, metric: "requests" | "tokens"): AlertRule => ({
      id: `alr_${project}_${metric}`,
      project,
      provider: null,
      model: null,
      app: null,
      metric,
      warn_pct: 70,
      critical_pct: 90,
      hysteresis_pct: 5,
      cooldown_s: 0,
      webhook: "http://127.0.0.1:1/hook",
      created_at: "2025-01-01T00:00:00.000Z",
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(row("a"), row("b")), { minLength: 1, maxLength: 10 }),
        async (rows) => {
          const states = new Map<string, string>();
          const store: StateStore = {
            async read(_token, refs) {
              return {
                outbox: null,
                states: refs.map((r) => states.get(`${r.ruleId} ${r.field}`) ?? null),
                refused: refs.map(() => false),
                removed: refs.map(() => false),
                applied: false,
                now: Date.now(),
              };
            },
            async commit(_token, writes) {
              for (const w of writes) states.set(`${w.ruleId} ${w.field}`, w.next);
              return { ok: true };
            },
            async clearOutbox() {},
          };
          const failures: SeriesFailure[] = [];
          const rules = [rule("a", "requests"), rule("a", "tokens"), rule("b", "requests")];
          const events = await evaluateBatch(store, "t", rules, rows, undefined, undefined, (f) =>
            failures.push(f),
          );
          expect(failures).toEqual([]);
          for (const e of events) {
            expect(Number.isFinite(e.used_pct) && e.used_pct >= 0).toBe(true);
            expect(Number.isFinite(e.limit) && Number.isFinite(e.remaining)).toBe(true);
            expect(e.reset_ms === null || Math.abs(e.reset_ms) <= YEAR_MS).toBe(true);
            expect(finiteOrNull(e.burn_per_s) && secondsOrNull(e.exhaustion_eta_s)).toBe(true);
            expectTime(e.at);
            expect(JSON.parse(JSON.stringify(e))).toEqual(e);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
