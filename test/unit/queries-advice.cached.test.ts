import fc from "fast-check";
import { expect, it } from "vitest";
import { poolViews } from "../../src/api/queries/headroom.js";
import { HISTORY_WINDOW_MS } from "../../src/alerts/burn-rate.js";
import { type AdviceAsk, type AdvisedPool, advise } from "../../src/headroom/advice.js";
import type { HotSeries } from "../../src/headroom/hot-series.js";
import { keyOf, memoryOnCopy } from "../helpers/advice-memory.js";

// Advice answers are kept (per project, ask and second) and made from pool views kept while they
// hold (src/api/queries/advice.ts, src/headroom/advice-moment.ts). Whatever the copy, the asks
// and the clock, an answer sent equals advice computed from fresh views at its `at` (advice.ts's
// reference, from /headroom's pool views with their burn rates), its `at` lies in the second it
// was sent in, and it says what fresh advice at the moment it is sent says: the same verdict,
// windows and alternatives, and a retry_after_ms that differs only by the time since its `at`.
// Windows reset and pools go stale while the clock moves, so kept views must end when they do.

const T0 = Date.UTC(2031, 2, 3, 4, 5, 6, 789);
const PROVIDERS = ["openai", "groq"] as const;
const MODELS = ["m1", "m2", "m3"] as const;
const iso = (ms: number) => new Date(ms).toISOString();

const windowArb = fc.record({
  dimension: fc.constantFrom("requests", "tokens", "input_tokens", "credits"),
  length: fc.constantFrom("1m", "1d", ""),
  limit: fc.integer({ min: 1, max: 1_000 }),
  remaining: fc.option(fc.integer({ min: 0, max: 1_000 })),
  // Reported up to 20 s before T0; resets from 3 s before T0 to 12 s after it, or never said.
  reportedBefore: fc.integer({ min: 0, max: 20_000 }),
  resetsIn: fc.option(fc.integer({ min: -3_000, max: 12_000 })),
  points: fc.array(fc.integer({ min: 0, max: 1_000 }), { maxLength: 4 }),
});

const seriesArb = fc.record({
  provider: fc.constantFrom(...PROVIDERS),
  model: fc.constantFrom(...MODELS),
  app: fc.constantFrom("a", "b", "c"),
  pool: fc.constantFrom("", "l:shared", "a:0123456789abcdef"),
  // Last seen from 20 s before T0 to 2 s after it: pools go stale while the clock moves.
  lastSeen: fc.integer({ min: -20_000, max: 2_000 }),
  windows: fc.uniqueArray(windowArb, {
    maxLength: 4,
    selector: (w) => `${w.dimension}@${w.length}`,
  }),
  legacy: fc.option(
    fc.record({
      requests: fc.integer({ min: 0, max: 100 }),
      tokens: fc.option(fc.integer({ min: 0, max: 5_000 })),
      resetMs: fc.integer({ min: 1, max: 15_000 }),
    }),
  ),
});

type SeriesSpec = typeof seriesArb extends fc.Arbitrary<infer T> ? T : never;

function copyOf(specs: SeriesSpec[]): Map<string, HotSeries> {
  const copy = new Map<string, HotSeries>();
  for (const s of specs) {
    const ls = T0 + s.lastSeen;
    const series: HotSeries = { ls, p: {}, w: {}, wp: {}, g: [ls, "r1", s.pool, "k1"] };
    for (const w of s.windows) {
      const key = `${w.dimension}@${w.length}`;
      const t = T0 - w.reportedBefore;
      const remaining = w.remaining === null ? null : Math.min(w.remaining, w.limit);
      (series.w as Record<string, unknown>)[key] = [
        t,
        "r1",
        String(w.limit),
        remaining === null ? null : String(remaining),
        w.resetsIn === null ? null : T0 + w.resetsIn,
      ];
      (series.wp as Record<string, unknown>)[key] = w.points.map((v, i) => [
        t - (w.points.length - i) * 2_000,
        String(v),
      ]);
    }
    if (s.legacy) {
      const la = ls - 1_000;
      series.la = la;
      series.li = "r1";
      series.l = [
        "100",
        String(s.legacy.requests),
        s.legacy.tokens === null ? null : "5000",
        s.legacy.tokens === null ? null : String(s.legacy.tokens),
        String(s.legacy.resetMs),
        String(s.legacy.resetMs),
      ];
      series.p = { requests: [[la - 3_000, String(s.legacy.requests + 5)]] };
    }
    copy.set(JSON.stringify([s.provider, s.model, s.app]), series);
  }
  return copy;
}

const askArb: fc.Arbitrary<AdviceAsk> = fc
  .record({
    provider: fc.constantFrom(...PROVIDERS, "mistral"),
    model: fc.constantFrom(...MODELS, "zz"),
    app: fc.option(fc.constantFrom("a", "b", "z"), { nil: undefined }),
    pool: fc.option(fc.constantFrom("shared", "nope"), { nil: undefined }),
    requests: fc.oneof(fc.constantFrom(0, 1, 2), fc.integer({ min: 0, max: 120 })),
    tokens: fc.oneof(fc.constantFrom(0, 1), fc.integer({ min: 0, max: 1_200 })),
  })
  .map((a) => {
    const ask: AdviceAsk = {
      provider: a.provider,
      model: a.model,
      requests: a.requests,
      tokens: a.tokens,
    };
    if (a.app !== undefined) ask.app = a.app;
    if (a.pool !== undefined) ask.pool = a.pool;
    return ask;
  });

const stepArb = fc.record({
  dt: fc.oneof(
    fc.constant(0),
    fc.integer({ min: 1, max: 40 }),
    fc.integer({ min: 100, max: 999 }),
    fc.integer({ min: 1_000, max: 4_000 }),
  ),
  // Of the run's few asks, so that the same ask comes again, within its second and after it.
  asks: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
});

/** advice.ts's reference from fresh views, as the answer's JSON. */
function fresh(copy: Map<string, HotSeries>, ask: AdviceAsk, at: number, staleAfterMs: number) {
  const since = Math.floor(at / 1000) * 1000 - HISTORY_WINDOW_MS;
  const views = poolViews(copy, {}, [], since, at, staleAfterMs) as AdvisedPool[];
  return JSON.parse(JSON.stringify({ at: iso(at), ...advise(views, ask, at) }));
}

it("sends, for any copy, asks and clock, what fresh advice says at the answer's `at` and at its own moment", async () => {
  let kept = 0;
  let made = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(seriesArb, {
        maxLength: 10,
        selector: (s) => `${s.provider}|${s.model}|${s.app}`,
      }),
      fc.integer({ min: -1_500, max: 500 }),
      fc.constantFrom(5_000, 15_000),
      fc.array(askArb, { minLength: 1, maxLength: 4 }),
      fc.array(stepArb, { minLength: 1, maxLength: 30 }),
      async (specs, start, staleAfterMs, asks, steps) => {
        const copy = copyOf(specs);
        const { memory, clock } = memoryOnCopy(() => copy, { staleAfterMs, t: T0 + start });
        const sent = new Map<string, Buffer>();
        for (const step of steps) {
          clock.t += step.dt;
          const t = clock.t;
          for (const i of step.asks) {
            const ask = asks[i % asks.length] as AdviceAsk;
            const answer = await memory.answer(keyOf("p"), ask);
            const key = JSON.stringify(ask);
            if (sent.get(key) === answer.body) kept++;
            else made++;
            sent.set(key, answer.body);
            const body = JSON.parse(answer.body.toString());
            const at = Date.parse(body.at);
            expect(at).toBeLessThanOrEqual(t);
            expect(Math.floor(at / 1000)).toBe(Math.floor(t / 1000));
            expect(body).toEqual(fresh(copy, ask, at, staleAfterMs));
            const now = fresh(copy, ask, t, staleAfterMs);
            expect({ ...body, at: null, retry_after_ms: null }).toEqual({
              ...now,
              at: null,
              retry_after_ms: null,
            });
            expect(body.retry_after_ms === null ? null : body.retry_after_ms - (t - at)).toBe(
              now.retry_after_ms,
            );
          }
        }
        memory.close();
      },
    ),
    { numRuns: 150 },
  );
  // Answers were kept and sent again, not only made: the property tested the kept ones too.
  expect(kept).toBeGreaterThan(50);
  expect(made).toBeGreaterThan(50);
});

it("sends one answer, bytes and ETag, to the asks of a second while nothing changes", async () => {
  const copy = copyOf([
    {
      provider: "openai",
      model: "m1",
      app: "a",
      pool: "",
      lastSeen: 0,
      windows: [
        {
          dimension: "tokens",
          length: "1m",
          limit: 1_000,
          remaining: 100,
          reportedBefore: 0,
          resetsIn: 30_000,
          points: [],
        },
      ],
      legacy: null,
    },
  ]);
  const { memory, clock, snapshots } = memoryOnCopy(() => copy, {
    staleAfterMs: 60_000,
    t: Math.floor(T0 / 1000) * 1000 + 100,
  });
  const ask = { provider: "openai", model: "m1", requests: 1, tokens: 500 };
  const first = await memory.answer(keyOf("p"), ask);
  clock.t += 800;
  // requests 0 and 1 ask the same (a call is one request at least).
  const again = await memory.answer(keyOf("p"), { ...ask, requests: 0 });
  expect(again).toBe(first);
  const body = JSON.parse(first.body.toString());
  expect(body.verdict).toBe("wait");
  expect(body.retry_after_ms).toBe(T0 + 30_000 - Date.parse(body.at));
  // The next second: made again, for its own moment.
  clock.t += 200;
  const next = await memory.answer(keyOf("p"), ask);
  expect(next).not.toBe(first);
  expect(JSON.parse(next.body.toString()).retry_after_ms).toBe(body.retry_after_ms - 1_000);
  expect(snapshots()).toBe(1);
  memory.close();
});
