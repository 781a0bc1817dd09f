import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import {
  latestOracle,
  normalise,
  RAW_ROWS_SQL,
  type RawRow,
  spendOracle,
  usageOracle,
  usedPctOf,
} from "../helpers/read-oracle.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Each endpoint's figures against an oracle computed from the raw rows of `reports_v`, for
// reports sent through the real edge and stored by the real worker: several ranges, windows and
// groupings, empty ranges, and a series that has only provider hints.

const HOUR = 3_600_000;
let s: ReadStack;
let k: ProjectKeys;
let rows: RawRow[];
/** A whole hour, 30 hours before the test started: every report is after it. */
let base: number;
let now: number;

const iso = (t: number) => new Date(t).toISOString();
const enc = (t: number) => encodeURIComponent(iso(t));
const PROVIDERS = ["openai", "anthropic"];
const MODELS = ["gpt-4o", "claude", null];

function reports(): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (let i = 0; i < 48; i++) {
    const t = base + i * 37 * 60_000 + (i % 7) * 13_000;
    const hint = i % 9 === 0;
    out.push({
      app: i % 4 === 0 ? "batch" : "chat",
      provider: PROVIDERS[i % 2],
      model: hint ? null : MODELS[i % 3],
      timestamp: iso(t),
      limits: hint
        ? {
            requests_limit: null,
            requests_remaining: null,
            tokens_limit: null,
            tokens_remaining: null,
            reset_requests_ms: null,
            reset_tokens_ms: null,
          }
        : {
            requests_limit: 100 + (i % 3) * 50,
            requests_remaining: 90 - ((i * 7) % 80),
            tokens_limit: i % 5 === 0 ? null : 10_000,
            tokens_remaining: i % 5 === 0 ? null : 9_000 - ((i * 611) % 8_000),
            reset_requests_ms: 60_000,
            reset_tokens_ms: 30_000,
          },
      // Binary fractions: sums are exact in both ClickHouse and JavaScript.
      ...(i % 3 === 0 && !hint
        ? { credits: { credits_limit: 100, credits_remaining: 80 - i * 0.5, request_cost: 0.25 } }
        : {}),
    });
  }
  // A series that only ever sent provider hints.
  for (let i = 0; i < 3; i++) {
    out.push({ provider: "groq", model: null, timestamp: iso(base + i * 3 * HOUR), limits: {} });
  }
  // An OpenRouter-style app: credits only, never a requests or tokens figure. No hints.
  for (let i = 0; i < 4; i++) {
    out.push({
      app: "router",
      provider: "openrouter",
      model: "auto",
      timestamp: iso(base + i * 2 * HOUR + 5 * 60_000),
      limits: {},
      credits: { credits_limit: null, credits_remaining: 20 - i * 0.25, request_cost: 0.25 },
    });
  }
  // A series burning its requests now: three figures in the last two minutes.
  for (const [ago, remaining] of [
    [120_000, 100],
    [60_000, 90],
    [10_000, 80],
  ] as const) {
    out.push({
      app: "live",
      provider: "mistral",
      model: "large",
      timestamp: iso(now - ago),
      limits: {
        requests_limit: 200,
        requests_remaining: remaining,
        tokens_limit: null,
        tokens_remaining: null,
        reset_requests_ms: HOUR,
        reset_tokens_ms: null,
      },
    });
  }
  return out;
}

beforeAll(async () => {
  now = Date.now();
  base = Math.floor(now / HOUR) * HOUR - 30 * HOUR;
  s = await startReadStack();
  k = await s.project();
  // A rule on anthropic's requests: its thresholds, not 70/90, decide that series' status.
  await createRuleStore(s.p.redis, s.p.config.QUEUE_PREFIX).create({
    project: k.project,
    provider: "anthropic",
    metric: "requests",
    warn_pct: 10,
    critical_pct: 20,
    webhook: "http://127.0.0.1:9/hook",
  });
  const sent = reports();
  await s.send(k.report, sent);
  await s.stored(k.project, sent.length);
  rows = normalise(await s.sql(RAW_ROWS_SQL(s.db), { project: k.project }));
});

afterAll(async () => {
  await s?.close();
});

const get = async (url: string) => {
  const res = await s.get(url, k.read);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
};

describe("GET /api/v1/usage equals the raw rows' aggregates", () => {
  const cases: [string, () => { from: number; to: number }, "minute" | "hour" | "day"][] = [
    ["the whole data, by day", () => ({ from: base - HOUR, to: now + HOUR }), "day"],
    ["the whole data, by hour", () => ({ from: base, to: now + 60_000 }), "hour"],
    ["six hours, by minute", () => ({ from: base + 2 * HOUR, to: base + 8 * HOUR }), "minute"],
    ["an odd range, by hour", () => ({ from: base + 1234567, to: base + 20 * HOUR + 7 }), "hour"],
    ["an empty range", () => ({ from: base - 10 * HOUR, to: base - 2 * HOUR }), "hour"],
  ];
  const groupings: ("provider" | "model" | "app")[][] = [
    [],
    ["provider"],
    ["provider", "model"],
    ["provider", "model", "app"],
  ];
  for (const [name, range, window] of cases) {
    for (const groups of groupings) {
      it(`${name}, grouped by [${groups.join(", ")}]`, async () => {
        const { from, to } = range();
        const g = groups.length ? `&group_by=${groups.join(",")}` : "";
        const body = await get(
          `/api/v1/usage?from=${enc(from)}&to=${enc(to)}&window=${window}${g}`,
        );
        const expected = usageOracle(rows, { from, to, window, groups });
        expect(body.points).toEqual(expected);
        if (name === "an empty range") expect(body.points).toEqual([]);
        else expect(body.points.length).toBeGreaterThan(0);
      });
    }
  }

  it("filters by provider, model and app, repeated or not", async () => {
    const from = base - HOUR;
    const to = now + HOUR;
    const body = await get(
      `/api/v1/usage?from=${enc(from)}&to=${enc(to)}&window=day&group_by=model&provider=openai&provider=groq&app=chat&app=default`,
    );
    const kept = rows.filter(
      (r) => ["openai", "groq"].includes(r.provider) && ["chat", "default"].includes(r.app),
    );
    expect(body.points).toEqual(usageOracle(kept, { from, to, window: "day", groups: ["model"] }));
  });

  it("shows the hints-only series with its reports and no figures", async () => {
    const body = await get(
      `/api/v1/usage?from=${enc(base - HOUR)}&to=${enc(now + HOUR)}&window=day&provider=groq`,
    );
    const reports = body.points.reduce((n: number, p: { reports: number }) => n + p.reports, 0);
    expect(reports).toBe(3);
    for (const p of body.points) {
      expect(p.provider_hints).toBe(p.reports);
      expect(p.requests_remaining_min).toBeNull();
      expect(p.used_pct_max).toBeNull();
      expect(p.credits_remaining_last).toBeNull();
    }
  });

  it("answers CSV for Accept: text/csv and for format=csv, with the JSON's figures", async () => {
    const url = `/api/v1/usage?from=${enc(base)}&to=${enc(now)}&window=day&group_by=provider`;
    const json = await get(url);
    const viaHeader = await s.get(url, k.read, { accept: "text/csv" });
    const viaParam = await s.get(`${url}&format=csv`, k.read);
    for (const res of [viaHeader, viaParam]) {
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^text\/csv/);
      const [header, ...lines] = res.body.trim().split("\r\n");
      expect(header?.split(",").slice(0, 3)).toEqual(["bucket", "provider", "reports"]);
      expect(lines).toHaveLength(json.points.length);
      const first = lines[0]?.split(",") ?? [];
      expect(first.slice(0, 3)).toEqual([
        json.points[0].bucket,
        json.points[0].provider,
        String(json.points[0].reports),
      ]);
    }
  });
});

describe("a CSV export of formula-like names", () => {
  /** Names that a spreadsheet would run: each trigger first, and after each common separator. */
  const NAMES = [
    "=1+1",
    "+1+1",
    "-1+1",
    "@SUM(1)",
    "\t=1+1",
    "\r=1+1",
    "x;=cmd|' /C calc'!A0;",
    "x,=1+1",
    "x\t=1+1",
    "x\n@SUM(1)",
    'x;"=1+1"',
    "x; -1+1",
  ];
  // A cell as the CSV's own parser reads it, and as each locale's spreadsheet splits it: the
  // text between separators (`,`, `;` or tab) and line breaks, quotes and spaces before it
  // aside. Only numbers may start with a sign.
  const FORMULA = /^[=+\-@\t\r]/;
  const NUMBER = /^-?\d+(\.\d+)?$/;
  /** The cells of an RFC 4180 CSV, as a comma-separated spreadsheet reads them. */
  function rfc4180Cells(csv: string): string[] {
    const cells: string[] = [];
    let i = 0;
    while (i < csv.length) {
      let value = "";
      if (csv[i] === '"') {
        for (i += 1; i < csv.length; i++) {
          if (csv[i] !== '"') value += csv[i];
          else if (csv[i + 1] === '"') value += csv[i++];
          else break;
        }
        i += 1;
      } else {
        const end = csv.slice(i).search(/,|\r\n/);
        value = end === -1 ? csv.slice(i) : csv.slice(i, i + end);
        i += value.length;
      }
      cells.push(value);
      i += csv.startsWith("\r\n", i) ? 2 : 1;
    }
    return cells;
  }
  function formulaCells(csv: string): string[] {
    const found = rfc4180Cells(csv)
      .filter((cell) => FORMULA.test(cell) && !NUMBER.test(cell))
      .map((cell) => `cell: ${cell}`);
    for (const separator of [",", ";", "\t"]) {
      for (const line of csv.split(/\r\n|\n|\r/)) {
        for (const part of line.split(separator)) {
          const text = part.replace(/^[ "]*/, "");
          if (FORMULA.test(text) && !NUMBER.test(text)) found.push(`${separator}: ${text}`);
        }
      }
    }
    return found;
  }

  it("has no cell that starts a formula, with any common separator", async () => {
    const c = await s.project();
    const sent = NAMES.flatMap((name, i) => [
      // Apps are trimmed at the edge: the leading tab and CR go through `model` and `provider`.
      { provider: `p${i}`, app: name, model: `m${i}`, limits: {} },
      { provider: `p${i}`, app: `a${i}`, model: name, limits: {} },
    ]);
    sent.push({ provider: "x;=cmd|' /c calc'!a0", app: "a", model: "m", limits: {} });
    await s.send(c.report, sent);
    await s.stored(c.project, sent.length);
    const hour = enc(Date.now() - HOUR);
    for (const url of [
      "/api/v1/usage?group_by=provider,model,app&format=csv",
      `/api/v1/usage?group_by=provider,model,app&window=hour&from=${hour}&format=csv`,
    ]) {
      const res = await s.get(url, c.read);
      expect(res.statusCode, res.body).toBe(200);
      // Every name is in the export, with no formula anywhere.
      expect(res.body.split("\r\n").length).toBeGreaterThan(sent.length);
      expect(formulaCells(res.body), url).toEqual([]);
    }
  });
});

describe("GET /api/v1/spend equals the raw rows' sums", () => {
  it.each([
    ["the last 24 hours (minute rollups)", () => [now - 24 * HOUR, now]],
    ["three days (minute rollups)", () => [now - 3 * 24 * HOUR, now]],
    ["ten days (daily rollups, whole days)", () => [now - 10 * 24 * HOUR, now]],
    ["an empty range", () => [base - 20 * HOUR, base - 10 * HOUR]],
  ])("%s", async (_name, range) => {
    const [from, to] = range() as [number, number];
    const body = await get(`/api/v1/spend?from=${enc(from)}&to=${enc(to)}`);
    const w = to - from > 7 * 24 * HOUR ? 24 * HOUR : 60_000;
    const f = Math.floor(from / w) * w;
    const t = Math.ceil(to / w) * w;
    expect(body.from).toBe(iso(f));
    expect(body.to).toBe(iso(t));
    expect(body.providers).toEqual(spendOracle(rows, f, t));
  });
});

describe("GET /api/v1/headroom equals each series' newest figures", () => {
  it("for every series, with status, burn rate and time to exhaustion", async () => {
    const body = await get("/api/v1/headroom");
    const at = Date.parse(body.at);
    const latest = latestOracle(rows);
    expect(body.series).toHaveLength(latest.size);
    for (const series of body.series) {
      const key = JSON.stringify([series.provider, series.model ?? "", series.app]);
      const o = latest.get(key);
      expect(o, key).toBeDefined();
      if (!o) continue;
      expect(series.last_seen).toBe(iso(o.lastSeen));
      if (!o.last) {
        // Only provider hints: no figures at all.
        expect(series.reported_at).toBeNull();
        expect(series.requests).toMatchObject({ limit: null, remaining: null, used_pct: null });
      } else {
        expect(series.reported_at).toBe(iso(o.last.t));
        for (const m of ["requests", "tokens"] as const) {
          // The newest report's contract figures; when they say nothing of m, its window: the
          // newest report's of the series that had them (issue 45's headline).
          const says = (r: RawRow) => r[`${m}_limit`] !== null || r[`${m}_remaining`] !== null;
          const from = says(o.last)
            ? o.last
            : rows
                .filter((r) => JSON.stringify([r.provider, r.model, r.app]) === key && says(r))
                .sort((a, b) => a.t - b.t)
                .at(-1);
          const limit = from?.[`${m}_limit`] ?? null;
          const remaining = from?.[`${m}_remaining`] ?? null;
          const reset = from?.[`reset_${m}_ms`] ?? null;
          const used = usedPctOf(limit, remaining);
          expect(series[m], `${key} ${m}`).toMatchObject({
            limit,
            remaining,
            used_pct: used === null ? null : Math.round(used * 100) / 100,
            resets_at: reset === null || !from ? null : iso(from.t + reset),
            ...(from && from !== o.last ? { source: "stated", dimension: m, window: null } : {}),
          });
        }
      }
      expect(series.credits.remaining).toBe(o.credits?.credits_remaining ?? null);
      // Status: stale after READ_STALE_AFTER_S (15 min) without a report; else by thresholds.
      // A window reset since its report counts for nothing.
      const current = (m: string) =>
        series[m].reset_since_report || series[m].used_pct === null ? null : series[m].used_pct;
      const pcts = ["requests", "tokens", "credits"]
        .map(current)
        .filter((p): p is number => p !== null);
      const [warn, critical] = series.provider === "anthropic" ? [10, 20] : [70, 90];
      const requestsPct = current("requests") ?? 0;
      const worst = Math.max(0, ...pcts);
      const expected =
        at - o.lastSeen > 900_000
          ? "stale"
          : series.provider === "anthropic"
            ? requestsPct >= critical
              ? "critical"
              : requestsPct >= warn
                ? "warning"
                : "ok"
            : worst >= critical
              ? "critical"
              : worst >= warn
                ? "warning"
                : "ok";
      expect(series.status, key).toBe(expected);
    }
  });

  it("gives the live series the alerts' burn rate and time to exhaustion", async () => {
    const body = await get("/api/v1/headroom?provider=mistral");
    expect(body.series).toHaveLength(1);
    const live = body.series[0];
    expect(live.status).toBe("ok");
    // 100 → 80 remaining over 110 s: 0.1818 requests/s; 80 left at that rate: 440 s, before
    // the reset an hour away.
    expect(live.requests.burn_per_s).toBeCloseTo(20 / 110, 4);
    expect(live.requests.burn_unit).toBe("requests/s");
    // 440 s after the last report, counted down to the answer's `at`.
    const exhaustedAt = now - 10_000 + 440_000;
    expect(Date.parse(live.requests.exhausted_at)).toBe(exhaustedAt);
    expect(live.requests.exhaustion_eta_s).toBeCloseTo(
      (exhaustedAt - Date.parse(body.at)) / 1000,
      1,
    );
    expect(live.tokens.burn_per_s).toBeNull();
  });

  it("filters series by provider, model and app", async () => {
    const body = await get("/api/v1/headroom?provider=openai&model=gpt-4o&app=chat");
    expect(
      body.series.map((x: { provider: string; model: string; app: string }) => [
        x.provider,
        x.model,
        x.app,
      ]),
    ).toEqual([["openai", "gpt-4o", "chat"]]);
  });
});

describe("GET /api/v1/reports pages through the raw rows, newest first", () => {
  it.each([
    ["everything", "", (_r: RawRow) => true],
    [
      "one provider and app",
      "&provider=anthropic&app=chat",
      (r: RawRow) => r.provider === "anthropic" && r.app === "chat",
    ],
  ])("%s", async (_name, filter, keep) => {
    const from = base - HOUR;
    const ids: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 50; pages++) {
      const c: string = cursor ? `&cursor=${cursor}` : "";
      const body = await get(`/api/v1/reports?from=${enc(from)}&limit=7${filter}${c}`);
      expect(body.items.length).toBeLessThanOrEqual(7);
      ids.push(...body.items.map((r: { id: string }) => r.id));
      cursor = body.next_cursor;
      if (!cursor) break;
    }
    const expected = rows
      .filter(keep)
      .sort((a, b) => b.t - a.t || (a.id < b.id ? 1 : -1))
      .map((r) => r.id);
    expect(ids).toEqual(expected);
  });

  it("gives each report's figures as stored, null where absent", async () => {
    const body = await get(`/api/v1/reports?from=${enc(base - HOUR)}&provider=groq&limit=1`);
    expect(body.items[0]).toMatchObject({
      provider: "groq",
      model: null,
      app: "default",
      limits: { requests_limit: null, tokens_remaining: null },
      credits: null,
    });
  });

  it("an empty range lists nothing", async () => {
    const body = await get(`/api/v1/reports?from=${enc(base - 9 * HOUR)}&to=${enc(base - HOUR)}`);
    expect(body).toEqual({ items: [], next_cursor: null });
  });
});

describe("GET /api/v1/alerts/events pages through the stored events, newest first", () => {
  it("with level and provider filters", async () => {
    const values = Array.from({ length: 9 }, (_, i) => ({
      event_id: `evt_${i.toString(16).padStart(32, "0")}`,
      rule_id: "alr_1",
      project_id: k.project,
      provider: PROVIDERS[i % 2],
      model: "",
      app: "chat",
      metric: "requests",
      level: ["warning", "critical", "resolved"][i % 3],
      used_pct: 50 + i,
      limit: 100,
      remaining: 50 - i,
      reset_ms: i % 2 ? 1000 : null,
      burn_per_s: null,
      exhaustion_eta_s: null,
      warn_pct: 70,
      critical_pct: 90,
      report_id: "00000000-0000-7000-8000-000000000000",
      // Two events share a time: the id orders them.
      at: iso(base + Math.floor(i / 2) * HOUR)
        .replace("T", " ")
        .replace("Z", ""),
    }));
    await s.p.client.insert({ table: `${s.db}.alert_events`, format: "JSONEachRow", values });
    const list = async (q: string) => {
      const ids: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 20; pages++) {
        const c: string = cursor ? `&cursor=${cursor}` : "";
        const body = await get(`/api/v1/alerts/events?from=${enc(base - HOUR)}&limit=2${q}${c}`);
        ids.push(...body.items.map((e: { id: string }) => e.id));
        cursor = body.next_cursor;
        if (!cursor) break;
      }
      return ids;
    };
    const expected = (keep: (v: (typeof values)[number]) => boolean) =>
      values
        .filter(keep)
        .sort((a, b) => (a.at === b.at ? (a.event_id < b.event_id ? 1 : -1) : a.at < b.at ? 1 : -1))
        .map((v) => v.event_id);
    expect(await list("")).toEqual(expected(() => true));
    expect(await list("&level=critical&level=resolved")).toEqual(
      expected((v) => v.level !== "warning"),
    );
    expect(await list("&provider=anthropic")).toEqual(expected((v) => v.provider === "anthropic"));
    const one = await get(
      `/api/v1/alerts/events?from=${enc(base - HOUR)}&limit=1&level=warning&provider=openai`,
    );
    expect(one.items[0]).toMatchObject({ model: null, level: "warning", reset_ms: null });
  });
});
