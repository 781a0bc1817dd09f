import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { AlertRule } from "../../src/alerts/rule.js";
import { toCsv } from "../../src/api/csv.js";
import { decodeCursor, encodeCursor, page } from "../../src/api/cursor.js";
import { parseQuery, rangeParams, seriesFilters } from "../../src/api/params.js";
import { readSpend } from "../../src/api/queries/spend.js";
import { createQueryCache } from "../../src/api/query-cache.js";
import { createReadLimit, READ_HOLD_MS } from "../../src/api/read-limit.js";
import { spendQuery } from "../../src/api/schemas/spend.js";
import { alignRange, defaultWindow, resolveRange } from "../../src/api/time-range.js";
import { type LatestFigures, seriesView, thresholdsFor } from "../../src/headroom/headroom-view.js";
import { HttpError } from "../../src/http/errors.js";

// The read API's pure parts: ranges and windows, cursors, CSV, the query cache, and a series'
// headroom view (status, thresholds, staleness).

const H = 3_600_000;
const D = 24 * H;
const T = Date.UTC(2030, 5, 15, 12, 34, 56, 789);

describe("time ranges", () => {
  it("defaults to the 24 hours before now; a lone from runs to now", () => {
    expect(resolveRange({}, T)).toEqual({ from: T - D, to: T });
    expect(resolveRange({ from: T - H }, T)).toEqual({ from: T - H, to: T });
    expect(resolveRange({ to: T - H }, T)).toEqual({ from: T - H - D, to: T - H });
    expect(() => resolveRange({ from: T, to: T }, T)).toThrow(HttpError);
  });

  it("last is the span ending at the next whole minute, in minutes, hours or days up to 400 days, and comes alone", () => {
    const q = z.strictObject({ ...rangeParams });
    const lastOf = (last: string) => parseQuery(q, { last }).last;
    expect(lastOf("15m")).toBe(15 * 60_000);
    expect(lastOf("24h")).toBe(D);
    expect(lastOf("400d")).toBe(400 * D);
    // Up to the next whole minute: 6 h of minute windows is 360 of them.
    const next = Date.UTC(2030, 5, 15, 12, 35);
    expect(resolveRange({ last: 6 * H }, T)).toEqual({ from: next - 6 * H, to: next });
    expect(resolveRange({ last: H }, next)).toEqual({ from: next - H, to: next });
    for (const bad of ["0h", "401d", "24", "1w", "-1h", "1.5h", " 1h", "9999999d"]) {
      expect(() => lastOf(bad), bad).toThrow(/last: /);
    }
    expect(() => parseQuery(q, { last: ["1h", "2h"] })).toThrow(/last: give this parameter once/);
    expect(() => resolveRange({ last: H, from: T - D }, T)).toThrow(/give either last or from\/to/);
    expect(() => resolveRange({ last: H, to: T }, T)).toThrow(/give either last or from\/to/);
  });

  it("picks a window from the span, aligns to whole windows and caps each window's range", () => {
    expect(defaultWindow({ from: T - 6 * H, to: T })).toBe("minute");
    expect(defaultWindow({ from: T - 7 * H, to: T })).toBe("hour");
    expect(defaultWindow({ from: T - 31 * D, to: T })).toBe("day");
    expect(alignRange({ from: T - H, to: T }, "hour")).toEqual({
      from: Date.UTC(2030, 5, 15, 11),
      to: Date.UTC(2030, 5, 15, 13),
    });
    expect(() => alignRange({ from: T - 7 * D, to: T }, "minute")).toThrow(/window=hour/);
    expect(() => alignRange({ from: T - 91 * D, to: T }, "hour")).toThrow(/window=day/);
    expect(alignRange({ from: T - 89 * D, to: T }, "hour").to).toBeGreaterThan(T);
  });
});

describe("spend", () => {
  it("reads the daily rollups when a range of 7 days widens past the minute rollups' cap", async () => {
    const queries: string[] = [];
    const store = {
      db: "db",
      rows: async <R>(query: string) => {
        queries.push(query);
        return [] as R[];
      },
    };
    const headroom = { store, rulesFor: async () => [], staleAfterMs: 900_000 };
    const lookup = {
      keyId: "k",
      projectId: "p",
      scope: "read" as const,
      plan: "free",
      overrides: {},
    };
    // Seven days to the millisecond, neither end on a whole minute.
    const q = spendQuery.parse({
      from: new Date(T - 7 * D).toISOString(),
      to: new Date(T).toISOString(),
    });
    const answer = await readSpend({ store, headroom, now: () => T }, lookup, q);
    expect(queries[0]).toMatch(/reports_daily/);
    expect(answer.from).toBe(new Date(Date.UTC(2030, 5, 8)).toISOString());
    // Exactly 7 whole minutes-aligned days stay on the minute rollups.
    const whole = spendQuery.parse({
      from: new Date(Date.UTC(2030, 5, 8, 12, 34)).toISOString(),
      to: new Date(Date.UTC(2030, 5, 15, 12, 34)).toISOString(),
    });
    await readSpend({ store, headroom, now: () => T }, lookup, whole);
    expect(queries[1]).toMatch(/reports_minute/);
  });
});

describe("series filters", () => {
  it("match what the edge stores: providers trimmed and lowercased, apps trimmed, models as sent", () => {
    const q = parseQuery(z.strictObject(seriesFilters), {
      provider: " OpenAI ",
      app: [" chat ", "batch"],
      model: ["grok ", " "],
    });
    expect(q).toEqual({ provider: ["openai"], app: ["chat", "batch"], model: ["grok ", " "] });
    for (const empty of [{ model: "" }, { app: " " }, { provider: "" }]) {
      expect(() => parseQuery(z.strictObject(seriesFilters), empty)).toThrow(HttpError);
    }
  });
});

describe("cursors", () => {
  const UUID = /^[0-9a-f-]{36}$/;
  it("round-trip, and anything else is a 400", () => {
    const c = { t: T, id: "01a20e9d-2268-7770-bf26-0c8d49932126" };
    expect(decodeCursor(encodeCursor(c), UUID)).toEqual(c);
    for (const bad of [
      "",
      "x",
      encodeCursor({ t: -1, id: c.id }),
      // Past what a time can be formatted as for ClickHouse (a six-digit year, an invalid date).
      encodeCursor({ t: Date.UTC(2100, 0, 1), id: c.id }),
      encodeCursor({ t: 8_000_000_000_000_000, id: c.id }),
      encodeCursor({ t: Number.MAX_SAFE_INTEGER, id: c.id }),
      encodeCursor({ t: 1, id: "a'b" }),
    ]) {
      expect(() => decodeCursor(bad, UUID)).toThrow(HttpError);
    }
  });

  it("pages give a next cursor only when a row is left", () => {
    const rows = [1, 2, 3].map((t) => ({ t, id: `id${t}` }));
    expect(page(rows, 3, (r) => r).next_cursor).toBeNull();
    const p = page(rows, 2, (r) => r);
    expect(p.items).toHaveLength(2);
    expect(decodeCursor(p.next_cursor as string, /^id\d$/)).toEqual({ t: 2, id: "id2" });
  });
});

describe("CSV", () => {
  it("quotes what needs it, leaves null cells empty and defuses formulas", () => {
    const csv = toCsv(
      ["a", "b", "c"],
      [
        { a: "x,y", b: null, c: 1.5 },
        { a: '=HYPERLINK("x")', b: "+1", c: -2 },
      ],
    );
    expect(csv).toBe(`a,b,c\r\n"x,y",,1.5\r\n"'=HYPERLINK(""x"")","'+1",-2\r\n`);
  });

  it("defuses a formula that another locale's separator would start", () => {
    expect(toCsv(["a"], [{ a: "x;=cmd|' /C calc'!A0;" }, { a: "x\t-1" }, { a: "a, @b" }])).toBe(
      `a\r\n"x;'=cmd|' /C calc'!A0;"\r\n"x\t'-1"\r\n"a,' @b"\r\n`,
    );
  });
});

describe("query cache", () => {
  it("shares a query in flight and within its TTL, never a failure", async () => {
    let t = 0;
    const cache = createQueryCache({ ttlMs: 100, now: () => t });
    let runs = 0;
    const run = async () => ++runs;
    const [x, y] = await Promise.all([cache.get("p", "q", run), cache.get("p", "q", run)]);
    expect([x, y, runs]).toEqual([1, 1, 1]);
    expect(await cache.get("p", "other", run)).toBe(2);
    t = 99;
    expect(await cache.get("p", "q", run)).toBe(1);
    t = 100;
    expect(await cache.get("p", "q", run)).toBe(3);
    await expect(
      cache.get("p", "bad", async () => Promise.reject(new Error("no"))),
    ).rejects.toThrow();
    expect(await cache.get("p", "bad", run)).toBe(4);
  });
});

describe("a series' headroom", () => {
  const latest = (requestsRemaining: number, lastSeen = T): LatestFigures => ({
    provider: "openai",
    model: "",
    app: "chat",
    lastSeen,
    limitsAt: lastSeen,
    creditsAt: null,
    requests: { limit: 100, remaining: requestsRemaining, resetMs: 60_000 },
    tokens: { limit: null, remaining: null, resetMs: null },
    credits: { limit: null, remaining: null },
  });
  const none = { requests: [], tokens: [], credits: [] };
  const opts = { now: T, staleAfterMs: 900_000 };
  const rule = (warn: number, critical: number, provider: string | null = null): AlertRule => ({
    id: "alr_1",
    project: "p",
    provider,
    model: null,
    app: null,
    metric: "requests",
    warn_pct: warn,
    critical_pct: critical,
    hysteresis_pct: 1,
    cooldown_s: 0,
    webhook: "http://x",
    created_at: "",
  });

  it("is ok, warning or critical at 70/90 % without rules, and stale when quiet", () => {
    expect(seriesView(latest(31), none, [], opts).status).toBe("ok");
    expect(seriesView(latest(30), none, [], opts).status).toBe("warning");
    expect(seriesView(latest(10), none, [], opts).status).toBe("critical");
    expect(seriesView(latest(10, T - 900_001), none, [], opts).status).toBe("stale");
  });

  it("uses the strictest rule that watches the series", () => {
    const rules = [rule(50, 60), rule(20, 95), rule(1, 2, "anthropic")];
    expect(thresholdsFor(rules, latest(0), "requests")).toEqual({ warnPct: 20, criticalPct: 60 });
    expect(seriesView(latest(45), none, rules, opts).status).toBe("warning");
    expect(seriesView(latest(39), none, rules, opts).status).toBe("critical");
  });

  it("gives null, never a sentinel, for what is unknown; the reset as an absolute time", () => {
    const v = seriesView(latest(50), none, [], opts);
    expect(v.model).toBeNull();
    expect(v.requests).toMatchObject({
      used_pct: 50,
      resets_at: new Date(T + 60_000).toISOString(),
    });
    expect(v.requests.burn_per_s).toBeNull();
    expect(v.tokens).toEqual({
      limit: null,
      remaining: null,
      used_pct: null,
      resets_at: null,
      resets_in_s: null,
      resets_unknown: "no_figures",
      reset_since_report: false,
      burn_per_s: null,
      burn: null,
      burn_unit: "tokens/s",
      burn_unknown: "no_figures",
      exhausted_at: null,
      exhaustion_eta_s: null,
      exhaustion_unknown: "no_figures",
    });
  });

  it("burns as the alerts compute it: a rise in remaining starts the history again", () => {
    const points = {
      ...none,
      requests: [
        [T - 60_000, 10],
        [T - 50_000, 90],
        [T - 10_000, 50],
      ] as [number, number][],
    };
    const v = seriesView(
      { ...latest(50), requests: { limit: 100, remaining: 50, resetMs: null } },
      points,
      [],
      opts,
    );
    expect(v.requests.burn_per_s).toBe(1);
    expect(v.requests.exhaustion_eta_s).toBe(50);
  });
});

describe("the read limit", () => {
  const lookup = {
    keyId: "key_r",
    projectId: "p",
    scope: "read" as const,
    plan: "free",
    overrides: {},
  };

  it("takes a quarter second's tokens at once from the key's bucket, spends them locally; an empty bucket is the edge's 429", async () => {
    const asked: unknown[] = [];
    let left = 7;
    const limit = createReadLimit({
      ratePerS: 20,
      burst: 100,
      take: async (_key, _rate, _capacity, want) => {
        asked.push([_key, _rate, _capacity, want]);
        const granted = Math.min(want, left);
        left -= granted;
        return { granted, remaining: left, msToNext: granted < want ? 60_000 : 0 };
      },
    });
    for (let i = 0; i < 7; i++) await limit(lookup);
    // 5 tokens (20/s × 0.25) at the first take, the 2 left at the second.
    expect(asked).toEqual([
      ["key_r", 20, 100, 5],
      ["key_r", 20, 100, 5],
    ]);
    const refused = await Promise.resolve(limit(lookup)).catch((e: unknown) => e);
    // Refused locally: the bucket said it had no whole token left for a minute.
    expect(asked).toHaveLength(2);
    expect(refused).toBeInstanceOf(HttpError);
    const err = refused as HttpError;
    expect(err.status).toBe(429);
    expect(err.toBody()).toMatchObject({ error: "rate_limited", limit: 20, remaining: 0 });
    expect(err.extra.headers).toMatchObject({ "retry-after": 60, "ratelimit-limit": 20 });
  });

  it("spends tokens taken for READ_HOLD_MS (a page's polls 2 s apart), then gives back the rest", async () => {
    const asked: number[][] = [];
    let t = 1_000_000;
    const limit = createReadLimit({
      ratePerS: 20,
      burst: 100,
      now: () => t,
      take: async (_key, _rate, _capacity, want, back) => {
        asked.push([want, back]);
        return { granted: want, remaining: 50, msToNext: 0 };
      },
    });
    for (const at of [0, 2_000, 4_000, READ_HOLD_MS - 1]) {
      t = 1_000_000 + at;
      await limit(lookup);
    }
    expect(asked).toEqual([[5, 0]]);
    t = 1_000_000 + READ_HOLD_MS;
    await limit(lookup);
    // The one token left of the first take goes back with the second.
    expect(asked).toEqual([
      [5, 0],
      [5, 1],
    ]);
  });

  it("is a 503, not a pass, when the bucket cannot be reached", async () => {
    const limit = createReadLimit({
      ratePerS: 20,
      burst: 100,
      take: async () => Promise.reject(new Error("redis down")),
    });
    const err = (await Promise.resolve(limit(lookup)).catch((e: unknown) => e)) as HttpError;
    expect(err.status).toBe(503);
  });
});
