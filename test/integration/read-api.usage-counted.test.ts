import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createLogger } from "../../src/lib/logger.js";
import type {
  DeclarationsReader,
  DeclaredLimit,
  ProjectDeclarations,
} from "../../src/providers/declared-limit.js";
import { GEMINI_FREE_TIER_DAY_429 } from "../fixtures/providers/documented.js";
import { NO_LIMITS } from "../fixtures/providers/source.js";
import { eventually } from "../helpers/eventually.js";
import { nextPacificMidnight } from "../helpers/pacific-midnight.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// GET /api/v1/usage's used % of windows with a declared or learned limit (issue 45), through the
// real pipeline (edge, queue, worker, ClickHouse, the hot copy) and a read API whose clock the
// test moves: Bedrock's declared 60 requests a minute counted, Azure's stated remaining over its
// declared limit, Gemini's learned day counted by Pacific day (read whole and refreshed by its
// newest buckets), and a project with no limit as before.

let s: ReadStack;
let k: ProjectKeys;
let bare: ProjectKeys;
let api: Api;
let clock = Date.now();

const MINUTE = 60_000;
const iso = (t: number) => new Date(t).toISOString();

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
    {
      provider: "mistral",
      model: "mistral-large",
      dimension: "requests",
      window: "7d",
      limit: 100,
    },
    { provider: "groq", model: "llama-3.1-8b", dimension: "requests", window: "1m", limit: 10 },
  ],
  pools: [],
};
const declarations: DeclarationsReader = {
  forProject: async (project) => (project === k.project ? declared : { limits: [], pools: [] }),
};

async function batch(key: string, reports: Record<string, unknown>[]) {
  const res = await s.edge.app.inject({
    method: "POST",
    url: "/api/reports",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(reports),
  });
  expect(res.statusCode, res.body).toBe(200);
}

interface Point {
  bucket: string;
  pool?: string;
  reports: number;
  used_pct_max: number | null;
  used_pct_by_dimension: Record<string, number>;
}

let polls = 0;

/** GET `url` at `at` (a little later each poll, within 10 s: buckets ahead are read again). */
async function usage(key: string, url: string, at: number): Promise<Point[]> {
  clock = at + (polls++ % 100) * 101;
  const res = await api.app.inject({
    method: "GET",
    url,
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { points: Point[] }).points;
}

const around = (t: number) => `from=${iso(t - 3_600_000)}&to=${iso(t + 3_600_000)}&window=minute`;
const at = (points: Point[], t: number) => points.find((p) => p.bucket === iso(t));

beforeAll(async () => {
  // Refreshes of a rolling answer read its newest buckets only (no whole read within the test).
  s = await startReadStack({ READ_USAGE_FULL_REFRESH_MS: "3600000" });
  k = await s.project();
  bare = await s.project();
  // The rolling answers are kept (a TTL of 100 ms, nothing stale served), so a poll after it
  // refreshes the held answer rather than reading it whole.
  api = await createApi(
    { ...s.p.config, READ_CACHE_TTL_MS: 100, READ_CACHE_STALE_MS: 0 },
    createLogger("silent", "test"),
    {
      clickhouse: s.p.client,
      now: () => clock,
      declarations,
    },
  );
});

afterAll(async () => {
  await api?.close();
  await s?.close();
});

describe("usage: declared limits", () => {
  const minute = Math.ceil(Date.now() / MINUTE) * MINUTE + MINUTE;
  const bedrock = (i: number) => ({
    provider: "bedrock",
    model: "anthropic.claude-3-haiku",
    app: "bed",
    timestamp: iso(minute + 1_000 + i * 1_000),
    limits: NO_LIMITS,
  });

  it("counts Bedrock's 48 reports of a minute against its declared 60 a minute: 80 %", async () => {
    await batch(
      k.report,
      Array.from({ length: 48 }, (_, i) => bedrock(i)),
    );
    await eventually(async () => {
      const point = at(
        await usage(k.read, `/api/v1/usage?provider=bedrock&${around(minute)}`, minute + 50_000),
        minute,
      );
      expect(point).toMatchObject({
        reports: 48,
        used_pct_max: 80,
        used_pct_by_dimension: { requests: 80 },
      });
    });
    // Grouped by pool: the pool of the one app, counted the same.
    const pooled = await usage(
      k.read,
      `/api/v1/usage?provider=bedrock&group_by=pool&${around(minute)}`,
      minute + 50_000,
    );
    expect(at(pooled, minute)).toMatchObject({
      used_pct_max: 80,
      used_pct_by_dimension: { requests: 80 },
    });
  });

  it("leaves a project with no limit as it was: the same reports give no %", async () => {
    await batch(
      bare.report,
      Array.from({ length: 48 }, (_, i) => bedrock(i)),
    );
    await eventually(async () =>
      expect(
        at(
          await usage(
            bare.read,
            `/api/v1/usage?provider=bedrock&${around(minute)}`,
            minute + 50_000,
          ),
          minute,
        )?.reports,
      ).toBe(48),
    );
    const point = at(
      await usage(bare.read, `/api/v1/usage?provider=bedrock&${around(minute)}`, minute + 50_000),
      minute,
    );
    expect(point).toMatchObject({ used_pct_max: null, used_pct_by_dimension: {} });
  });

  it("gives Azure's stated remaining 20 the declared limit 100: 80 %", async () => {
    const now = Math.floor(Date.now() / MINUTE) * MINUTE;
    await batch(k.report, [
      {
        provider: "azure-openai",
        model: "gpt-4o",
        app: "az",
        timestamp: iso(now + 5_000),
        limits: NO_LIMITS,
        headers: { "x-ratelimit-remaining-requests": "20" },
      },
    ]);
    await eventually(async () =>
      expect(
        at(
          await usage(k.read, `/api/v1/usage?provider=azure-openai&${around(now)}`, now + 30_000),
          now,
        ),
      ).toMatchObject({ used_pct_max: 80, used_pct_by_dimension: { requests: 80 } }),
    );
    // A dashboard's last 24 h, held; then the limit declared anew (200): its next refresh, ten
    // minutes on, gives the old bucket the new limit, though no report came since.
    const rolling = "/api/v1/usage?provider=azure-openai&window=minute";
    await eventually(async () =>
      expect(at(await usage(k.read, rolling, now + 60_000), now)?.used_pct_max).toBe(80),
    );
    const azure = declared.limits.findIndex((l) => l.provider === "azure-openai");
    declared.limits[azure] = { ...(declared.limits[azure] as DeclaredLimit), limit: 200 };
    try {
      await eventually(async () =>
        expect(at(await usage(k.read, rolling, now + 10 * MINUTE), now)).toMatchObject({
          used_pct_max: 90,
          used_pct_by_dimension: { requests: 90 },
        }),
      );
    } finally {
      declared.limits[azure] = { ...(declared.limits[azure] as DeclaredLimit), limit: 100 };
    }
  });
});

describe("usage: counted windows read at the grain their periods need (issue 48)", () => {
  const DAY = 86_400_000;
  const HOUR = 3_600_000;
  const sent = (provider: string, model: string, app: string, t: number) => ({
    provider,
    model,
    app,
    timestamp: iso(t),
    limits: NO_LIMITS,
  });
  const many = (n: number, make: (i: number) => Record<string, unknown>) =>
    Array.from({ length: n }, (_, i) => make(i));

  it("counts a declared rolling week from the days before the range's day, that day's hours and the range's minutes", async () => {
    // Yesterday: 30 reports three days before it (a day's rollup), 5 at its 01:00 (its hours),
    // 2 at 09:00 and 10 at 10:00 (the range's minutes), against 100 a rolling week.
    const day = Math.floor(Date.now() / DAY) * DAY - DAY;
    const mistral = (t: number) => (i: number) =>
      sent("mistral", "mistral-large", "mis", t + i * 1_000);
    await batch(k.report, many(30, mistral(day - 3 * DAY + 12 * HOUR)));
    await batch(k.report, many(5, mistral(day + HOUR)));
    await batch(k.report, many(2, mistral(day + 9 * HOUR)));
    await batch(k.report, many(10, mistral(day + 10 * HOUR)));
    const url = `/api/v1/usage?provider=mistral&from=${iso(day + 9 * HOUR)}&to=${iso(day + 11 * HOUR)}&window=minute`;
    await eventually(async () => {
      const points = await usage(k.read, url, Date.now());
      // At 09:00, the 37 counted by then (not the day's 47: its hours, not its day, are read).
      expect(at(points, day + 9 * HOUR)).toMatchObject({
        reports: 2,
        used_pct_by_dimension: { requests: 37 },
      });
      expect(at(points, day + 10 * HOUR)?.used_pct_by_dimension).toEqual({ requests: 47 });
    });
  });

  it("gives a declared minute window in day buckets its busiest minute, per app and over apps", async () => {
    // Two days ago, against 10 a minute: g1's 4 then 6 in the next minute, g2's 3 an hour later.
    const day = Math.floor(Date.now() / DAY) * DAY - 2 * DAY;
    const groq = (app: string, t: number) => (i: number) =>
      sent("groq", "llama-3.1-8b", app, t + i * 1_000);
    await batch(k.report, many(4, groq("g1", day + 5 * HOUR)));
    await batch(k.report, many(6, groq("g1", day + 5 * HOUR + MINUTE)));
    await batch(k.report, many(3, groq("g2", day + 6 * HOUR)));
    const range = `from=${iso(day)}&to=${iso(day + DAY)}&window=day`;
    await eventually(async () => {
      const points = await usage(k.read, `/api/v1/usage?provider=groq&${range}`, Date.now());
      expect(at(points, day)).toMatchObject({
        reports: 13,
        used_pct_max: 60,
        used_pct_by_dimension: { requests: 60 },
      });
    });
    const byApp = await usage(
      k.read,
      `/api/v1/usage?provider=groq&group_by=app&${range}`,
      Date.now(),
    );
    expect(
      Object.fromEntries(
        (byApp as (Point & { app: string })[]).map((p) => [p.app, p.used_pct_by_dimension]),
      ),
    ).toEqual({ g1: { requests: 60 }, g2: { requests: 30 } });
  });
});

describe("usage: a learned limit counted by Pacific day", () => {
  it("counts Gemini's calls against the 250 a day its 429 taught, from the Pacific day's start, and anew after midnight", async () => {
    // The midnight within a few hours of now, whatever the time of day: every report, 3 h before
    // it to a minute after, lies within the edge's bound of 24 h ahead (a midnight found after
    // now + 3 h was over a day ahead for three hours of every day, and its reports refused).
    const midnight = nextPacificMidnight(Date.now() - 21 * 60 * MINUTE);
    const t0 = midnight - 180 * MINUTE;
    const gemini = (t: number, more: Record<string, unknown> = {}) => ({
      provider: "gemini",
      model: "gemini-2.5-flash",
      app: "gem",
      timestamp: iso(t),
      limits: NO_LIMITS,
      ...more,
    });
    const five = (from: number) => [0, 1, 2, 3, 4].map((i) => gemini(from + i * 1_000));
    await batch(k.report, [gemini(t0, { error: GEMINI_FREE_TIER_DAY_429 })]);
    await batch(k.report, five(t0 + 2 * MINUTE));
    // The last 24 h, as a dashboard polls it: 5 of 250 in the minute after the 429's.
    const rolling = "/api/v1/usage?provider=gemini&window=minute";
    await eventually(async () => {
      const points = await usage(k.read, rolling, t0 + 3 * MINUTE);
      expect(at(points, t0)?.used_pct_by_dimension).toEqual({ requests: 100 });
      expect(at(points, t0 + 2 * MINUTE)).toMatchObject({
        used_pct_max: 2,
        used_pct_by_dimension: { requests: 2 },
      });
    });
    // Polled on (the answer's end moves on), then five more, read by a refresh of its newest
    // buckets only (hours after the first five): the day's ten count.
    await usage(k.read, rolling, midnight - 20 * MINUTE);
    await batch(k.report, five(midnight - 10 * MINUTE));
    await eventually(async () => {
      const points = await usage(k.read, rolling, midnight - 9 * MINUTE);
      expect(at(points, midnight - 10 * MINUTE)?.used_pct_by_dimension).toEqual({ requests: 4 });
      expect(at(points, t0 + 2 * MINUTE)?.used_pct_by_dimension).toEqual({ requests: 2 });
    });
    // Five sent late, dated an hour after the first (a client's queue), read by a refresh: the
    // buckets after theirs count them too, not only their own (10, then 15 of 250).
    await batch(k.report, five(t0 + 60 * MINUTE));
    await eventually(async () => {
      const points = await usage(k.read, rolling, midnight - 2 * MINUTE);
      expect(at(points, t0 + 60 * MINUTE)?.used_pct_by_dimension).toEqual({ requests: 4 });
      expect(at(points, midnight - 10 * MINUTE)?.used_pct_by_dimension).toEqual({ requests: 6 });
    });
    // After Pacific midnight, a new day: five of 250 again.
    await batch(k.report, five(midnight + MINUTE));
    await eventually(async () => {
      const points = await usage(
        k.read,
        `/api/v1/usage?provider=gemini&${around(midnight)}`,
        midnight + 2 * MINUTE,
      );
      expect(at(points, midnight + MINUTE)?.used_pct_by_dimension).toEqual({ requests: 2 });
      expect(at(points, midnight - 10 * MINUTE)?.used_pct_by_dimension).toEqual({ requests: 6 });
    });
  });
});
