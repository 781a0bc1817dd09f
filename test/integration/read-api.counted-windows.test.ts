import fc from "fast-check";
import { v4 as uuidv4 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { cliPrincipal, createControl } from "../../src/control/service.js";
import { createLogger } from "../../src/lib/logger.js";
import type {
  DeclarationsReader,
  ProjectDeclarations,
} from "../../src/providers/declared-limit.js";
import { BEDROCK_THROTTLING, GEMINI_FREE_TIER_DAY_429 } from "../fixtures/providers/documented.js";
import { NO_LIMITS } from "../fixtures/providers/source.js";
import { eventually } from "../helpers/eventually.js";
import { nextPacificMidnight } from "../helpers/pacific-midnight.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Headroom for providers that state nothing (issue 45), through the real pipeline (edge, queue,
// worker, ClickHouse, the hot copy in Redis) and a read API whose clock the test moves:
//
// - Gemini: a 429 body teaches the per-day requests limit; reports count down from it; the
//   window resets at Pacific midnight; a second 429 marks it exhausted until its retryDelay;
// - Bedrock: a declared 60 requests per minute counts reports sent in batches with their ids,
//   some sent again (each counts once), and a ThrottlingException marks it exhausted;
// - Azure: a stated remaining with a declared limit gives the used percentage;
// - DeepSeek with nothing declared stays unknown, and is never a provider hint.

let s: ReadStack;
let k: ProjectKeys;
let api: Api;
let clock = Date.now();

const iso = (t: number) => new Date(t).toISOString();

/** The project's declarations, as the control plane's reader would give them. */
const declared: ProjectDeclarations = {
  limits: [
    {
      provider: "bedrock",
      model: "anthropic.claude-3-haiku",
      dimension: "requests",
      window: "1m",
      limit: 60,
    },
    { provider: "azure-openai", model: "gpt-4o", dimension: "requests", window: "1m", limit: 100 },
  ],
  pools: [],
};
const declarations: DeclarationsReader = {
  forProject: async (project) => (project === k.project ? declared : { limits: [], pools: [] }),
};

async function batch(reports: Record<string, unknown>[]) {
  const res = await s.edge.app.inject({
    method: "POST",
    url: "/api/reports",
    headers: { authorization: `Bearer ${k.report}`, "content-type": "application/json" },
    payload: JSON.stringify(reports),
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { results: { id: string; duplicate?: boolean }[] }).results;
}

async function get<T>(url: string, at: number): Promise<T> {
  clock = at;
  const res = await api.app.inject({
    method: "GET",
    url,
    headers: { authorization: `Bearer ${k.read}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as T;
}

interface WindowView {
  dimension: string;
  window: string | null;
  source: string;
  limit: number | null;
  remaining: number | null;
  used_pct: number | null;
  resets_at: string | null;
  resets: string | null;
  learned_from: { report_id: string; at: string } | null;
}
interface SeriesView {
  provider: string;
  app: string;
  status: string;
  /** The headline: the contract's figures, else the metric's most used window. */
  requests: Omit<WindowView, "learned_from" | "resets">;
  windows: WindowView[];
}

async function seriesAt(provider: string, at: number): Promise<SeriesView | undefined> {
  const body = await get<{ series: SeriesView[] }>("/api/v1/headroom?group=app", at);
  return body.series.find((x) => x.provider === provider);
}

async function windowAt(provider: string, window: string, at: number) {
  return (await seriesAt(provider, at))?.windows.find(
    (w) => w.dimension === "requests" && w.window === window,
  );
}

beforeAll(async () => {
  s = await startReadStack();
  k = await s.project();
  api = await createApi(s.p.config, createLogger("silent", "test"), {
    clickhouse: s.p.client,
    now: () => clock,
    declarations,
  });
});

afterAll(async () => {
  await api?.close();
  await s?.close();
});

describe("Gemini: learned from a 429, counted, reset at Pacific midnight", () => {
  it("learns the per-day requests limit, counts down from it, resets, and marks a second 429", async () => {
    // Ten minutes before a Pacific midnight: every report of the day falls in one Pacific day,
    // whatever the date and time the test runs at. The midnight is the first after 62 min ago, so
    // the last report (midnight + 5 s) is under 24 h ahead even on the 25 h day DST ends
    // (23 h 58 min at most), inside the edge's bound; the first is at most 72 min in the past.
    // (A midnight found after now + 11 min put `base` over a day ahead in the minute 10 min
    // before a midnight, and CI ran in it.)
    const midnight = nextPacificMidnight(Date.now() - 62 * 60_000);
    const base = midnight - 10 * 60_000;
    const gemini = (at: number, more: Record<string, unknown>) => ({
      provider: "gemini",
      model: "gemini-2.5-flash",
      app: "gem",
      timestamp: iso(at),
      limits: NO_LIMITS,
      ...more,
    });

    const [first] = await batch([gemini(base, { error: GEMINI_FREE_TIER_DAY_429 })]);
    await eventually(async () =>
      expect(await windowAt("gemini", "1d", base + 1_000)).toMatchObject({
        source: "learned",
        limit: 250,
        remaining: 0,
        resets_at: iso(base + 22_000),
        learned_from: { report_id: first?.id, at: iso(base) },
      }),
    );
    expect((await seriesAt("gemini", base + 1_000))?.status).toBe("critical");

    // Three calls after the retry delay, with their usage: counted against the learned 250.
    await batch(
      [30, 31, 32].map((s) =>
        gemini(base + s * 1_000, { usage: { input_tokens: 100, output_tokens: 10 } }),
      ),
    );
    await eventually(async () =>
      expect(await windowAt("gemini", "1d", base + 60_000)).toMatchObject({
        source: "counted",
        limit: 250,
        remaining: 247,
        used_pct: 1.2,
        resets: "pacific_day",
        resets_at: iso(midnight),
        learned_from: { report_id: first?.id },
      }),
    );
    expect((await seriesAt("gemini", base + 60_000))?.status).toBe("ok");

    // Past Pacific midnight: a new day, nothing used yet.
    const nextMidnight = nextPacificMidnight(midnight + 60_000);
    expect(await windowAt("gemini", "1d", midnight + 1_000)).toMatchObject({
      source: "counted",
      remaining: 250,
      resets_at: iso(nextMidnight),
    });

    // A second 429 in the new day: used up until its retryDelay, then counted again.
    await batch([gemini(midnight + 5_000, { error: GEMINI_FREE_TIER_DAY_429 })]);
    await eventually(async () =>
      expect(await windowAt("gemini", "1d", midnight + 10_000)).toMatchObject({
        source: "learned",
        remaining: 0,
        resets_at: iso(midnight + 27_000),
      }),
    );
    expect(await windowAt("gemini", "1d", midnight + 28_000)).toMatchObject({
      source: "counted",
      remaining: 250,
    });
  });
});

describe("Bedrock: a declared limit counted, and a ThrottlingException", () => {
  it("counts each report once however its batches are sent again, and marks the pool exhausted", async () => {
    // A minute of its own, ahead of now: every report in it.
    const minute = Math.ceil(Date.now() / 60_000) * 60_000 + 60_000;
    const bedrock = (at: number, more: Record<string, unknown> = {}) => ({
      provider: "bedrock",
      model: "anthropic.claude-3-haiku",
      app: "bed",
      timestamp: iso(at),
      limits: NO_LIMITS,
      ...more,
    });
    const reports = Array.from({ length: 12 }, (_, i) =>
      bedrock(minute + 1_000 + i * 500, { id: uuidv4() }),
    );
    // Cut into batches as the run's seed says; some batches sent again, whole.
    const [cuts, again] = fc.sample(
      fc.tuple(
        fc.uniqueArray(fc.integer({ min: 1, max: 11 }), { maxLength: 5 }),
        fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
      ),
      1,
    )[0] as [number[], boolean[]];
    const bounds = [0, ...cuts.sort((a, b) => a - b), reports.length];
    const batches = bounds.slice(1).map((end, i) => reports.slice(bounds[i], end));
    for (const b of batches) expect((await batch(b)).every((r) => !r.duplicate)).toBe(true);
    for (const [i, b] of batches.entries())
      if (again[i]) expect((await batch(b)).every((r) => r.duplicate)).toBe(true);
    await eventually(async () =>
      expect(await windowAt("bedrock", "1m", minute + 30_000)).toMatchObject({
        source: "counted",
        limit: 60,
        remaining: 48,
        used_pct: 20,
        resets: "utc_minute",
        resets_at: iso(minute + 60_000),
      }),
    );
    // The contract's fields say nothing: the headline requests is that window, and says so.
    expect((await seriesAt("bedrock", minute + 30_000))?.requests).toMatchObject({
      source: "counted",
      dimension: "requests",
      window: "1m",
      limit: 60,
      remaining: 48,
      used_pct: 20,
      resets_at: iso(minute + 60_000),
    });

    // A ThrottlingException names no window: the pool as a whole, until the window's reset.
    await batch([bedrock(minute + 35_000, { error: BEDROCK_THROTTLING })]);
    await eventually(async () =>
      expect(await windowAt("bedrock", "1m", minute + 40_000)).toMatchObject({
        source: "declared",
        limit: 60,
        remaining: 0,
        used_pct: 100,
        resets_at: iso(minute + 60_000),
      }),
    );
    expect((await seriesAt("bedrock", minute + 40_000))?.status).toBe("critical");
    // The next minute: the mark is over, nothing counted yet.
    expect(await windowAt("bedrock", "1m", minute + 61_000)).toMatchObject({
      source: "counted",
      remaining: 60,
    });
    // Each report once in ClickHouse too.
    expect(
      await s.p.scalar(
        `SELECT count() FROM ${s.db}.reports_v WHERE project_id = '${k.project}' AND provider = 'bedrock'`,
      ),
    ).toBe(13);
  });
});

describe("Azure and DeepSeek", () => {
  it("gives Azure's stated remaining a used percentage from its declared limit", async () => {
    const now = Date.now();
    await batch([
      {
        provider: "azure-openai",
        model: "gpt-4o",
        app: "az",
        timestamp: iso(now),
        limits: NO_LIMITS,
        headers: { "x-ratelimit-remaining-requests": "40", "x-ratelimit-remaining-tokens": "9000" },
      },
    ]);
    await eventually(async () =>
      expect(await windowAt("azure-openai", "1m", now + 1_000)).toMatchObject({
        source: "declared",
        limit: 100,
        remaining: 40,
        used_pct: 60,
      }),
    );
    const tokens = (await seriesAt("azure-openai", now + 1_000))?.windows.find(
      (w) => w.dimension === "tokens",
    );
    expect(tokens).toMatchObject({ source: "stated", limit: null, remaining: 9000 });
  });

  it("takes a limit declared over the control plane: the API's own reader, no reader given", async () => {
    // As `headroom limits set` and PUT /api/v1/projects/{p}/limits write it.
    const control = createControl(s.p.redis, s.p.config);
    await control.setLimits(cliPrincipal(), k.project, {
      limits: [
        {
          provider: "azure-openai",
          model: "gpt-4o-mini",
          dimension: "requests",
          window: "1m",
          limit: 50,
        },
      ],
    });
    const own = await createApi(s.p.config, createLogger("silent", "test"), {
      clickhouse: s.p.client,
    });
    try {
      await batch([
        {
          provider: "azure-openai",
          model: "gpt-4o-mini",
          app: "az-mini",
          timestamp: iso(Date.now()),
          limits: NO_LIMITS,
          headers: { "x-ratelimit-remaining-requests": "30" },
        },
      ]);
      await eventually(async () => {
        const res = await own.app.inject({
          method: "GET",
          url: "/api/v1/headroom?group=app",
          headers: { authorization: `Bearer ${k.read}` },
        });
        const series = (res.json() as { series: SeriesView[] }).series.find(
          (x) => x.app === "az-mini",
        );
        expect(series?.windows.find((w) => w.dimension === "requests")).toMatchObject({
          source: "declared",
          limit: 50,
          remaining: 30,
          used_pct: 40,
        });
      });
    } finally {
      await own.close();
    }
  });

  it("leaves DeepSeek with nothing declared unknown, and counts none of its calls as hints", async () => {
    const now = Date.now();
    await batch(
      [0, 1, 2].map((i) => ({
        provider: "deepseek",
        model: "deepseek-chat",
        app: "ds",
        timestamp: iso(now + i),
        limits: NO_LIMITS,
        usage: { input_tokens: 1200, output_tokens: 300, cached_tokens: 1000 },
      })),
    );
    await eventually(async () => expect((await seriesAt("deepseek", now + 1_000))?.app).toBe("ds"));
    const series = await seriesAt("deepseek", now + 1_000);
    expect(series?.windows).toEqual([]);
    const advice = await get<{ verdict: string; reason: string | null }>(
      "/api/v1/advice?provider=deepseek&model=deepseek-chat",
      now + 1_000,
    );
    expect(advice).toMatchObject({ verdict: "unknown", reason: "no_figures" });
    const usage = await get<{ points: { reports: number; provider_hints: number }[] }>(
      `/api/v1/usage?provider=deepseek&from=${iso(now - 3_600_000)}&to=${iso(now + 3_600_000)}&window=hour`,
      now + 1_000,
    );
    expect(usage.points.reduce((n, p) => n + p.reports, 0)).toBe(3);
    expect(usage.points.reduce((n, p) => n + p.provider_hints, 0)).toBe(0);
    // Its usage is stored.
    expect(
      await s.p.scalar(
        `SELECT sum(usage_input_tokens) FROM ${s.db}.reports_v WHERE project_id = '${k.project}' AND provider = 'deepseek'`,
      ),
    ).toBe(3600);
  });
});
