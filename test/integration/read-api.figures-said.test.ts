import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS, migrate } from "../../src/clickhouse/migrations.js";
import {
  ANTHROPIC_RATE_LIMIT_ERROR,
  anthropicHeaders,
  GEMINI_PAID_TIER_429,
} from "../fixtures/providers/documented.js";
import { NO_LIMITS } from "../fixtures/providers/source.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Issue 45's two defects, through the real pipeline (edge → queue → worker → ClickHouse → read
// API, exporter and `headroom stats`): reports whose figures came only from the provider's headers
// (Anthropic's, with null `limits`) or its error body (Gemini's 429) are no provider hints — they
// are requests in /spend, their windows make /usage's used_pct_max and stats' current headroom —
// and every view of a report shows its windows and its error. One real hint (no figure at all)
// is counted as one.

let s: ReadStack;
let k: ProjectKeys;
const dir = mkdtempSync(join(tmpdir(), "headroom-figures-said-"));

const AT = Date.now();
const iso = (ms: number) => new Date(ms).toISOString();
const RESET = `${iso(AT + 60_000).slice(0, 19)}Z`;

const base = (provider: string, model: string, more: Record<string, unknown>) => ({
  provider,
  model,
  app: "support-bot",
  timestamp: iso(AT),
  limits: {},
  ...more,
});

const ANTHROPIC = base("anthropic", "claude-sonnet-4", { headers: anthropicHeaders(RESET) });
const ANTHROPIC_429 = base("anthropic", "claude-sonnet-4", {
  headers: anthropicHeaders(RESET),
  error: ANTHROPIC_RATE_LIMIT_ERROR,
});
const GEMINI = base("gemini", "gemini-2.5-flash", { error: GEMINI_PAID_TIER_429 });
/** A provider hint: nothing but who was called (a client's start-up report: no model). */
const HINT = base("openai", "gpt-4o", { model: null });

let ids: string[];

beforeAll(async () => {
  s = await startReadStack();
  k = await s.project();
  ids = await s.send(k.report, [ANTHROPIC, ANTHROPIC, ANTHROPIC_429, GEMINI, HINT]);
  await s.stored(k.project, 5);
}, 120_000);

afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface UsagePoint {
  provider: string;
  reports: number;
  provider_hints: number;
  used_pct_max: number | null;
  used_pct_by_dimension: Record<string, number>;
}

async function json<T>(url: string): Promise<T> {
  const res = await s.get(url, k.read);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as T;
}

describe("a report whose figures came from its headers or error body is no provider hint", () => {
  it("/usage counts one hint of five, and its used_pct_max is the windows' worst", async () => {
    const { points } = await json<{ points: UsagePoint[] }>(
      "/api/v1/usage?window=day&group_by=provider",
    );
    const of = new Map(points.map((p) => [p.provider, p]));
    expect(points.reduce((n, p) => n + p.provider_hints, 0)).toBe(1);
    expect(of.get("anthropic")).toMatchObject({ reports: 3, provider_hints: 0 });
    // 95 of 8,000 output tokens left: 98.81 % used, stated only in Anthropic's headers.
    expect(of.get("anthropic")?.used_pct_by_dimension.output_tokens).toBe(98.81);
    expect(of.get("anthropic")?.used_pct_max).toBe(98.81);
    // Gemini's 429 body: its input tokens window is exhausted.
    expect(of.get("gemini")).toMatchObject({ reports: 1, provider_hints: 0, used_pct_max: 100 });
    expect(of.get("openai")).toMatchObject({ reports: 1, provider_hints: 1, used_pct_max: null });

    // The CSV has no per-dimension column: used_pct_max is where the window shows.
    const csv = await s.get("/api/v1/usage?window=day&group_by=provider&format=csv", k.read);
    expect(csv.statusCode).toBe(200);
    const [head = "", ...lines] = csv.body.trim().split("\r\n");
    const column = head.split(",").indexOf("used_pct_max");
    const anthropic = lines.find((l) => l.includes(",anthropic,"))?.split(",");
    expect(anthropic?.[column]).toBe("98.81");
  });

  it("/spend counts every call as a request, figures or not, and no start-up hint", async () => {
    const { providers } = await json<{ providers: { provider: string; requests: number }[] }>(
      "/api/v1/spend",
    );
    expect(Object.fromEntries(providers.map((p) => [p.provider, p.requests]))).toEqual({
      anthropic: 3,
      gemini: 1,
      openai: 0,
    });
    // Bedrock's calls state nothing (the real client sends its model and six nulls): requests
    // all the same, as its counted windows count them.
    const other = await s.project();
    const bedrock = base("bedrock", "anthropic.claude-3-haiku", { limits: NO_LIMITS });
    await s.send(other.report, [bedrock, bedrock, { ...HINT, provider: "bedrock" }]);
    await s.stored(other.project, 3);
    const res = await s.get("/api/v1/spend", other.read);
    expect(res.statusCode, res.body).toBe(200);
    const spend = res.json() as { providers: { provider: string; requests: number }[] };
    expect(spend.providers.map((p) => [p.provider, p.requests])).toEqual([["bedrock", 2]]);
  });

  it("the exporter's headroom_provider_hints_total counts the one real hint", async () => {
    const res = await s.get("/api/v1/metrics", k.read);
    expect(res.statusCode).toBe(200);
    // The counters are since 00:00 UTC: only when the reports' day is still today.
    if (Math.floor(Date.now() / 86_400_000) !== Math.floor(AT / 86_400_000)) return;
    const hints = res.body
      .split("\n")
      .filter((l) => l.startsWith("headroom_provider_hints_total{"))
      .map((l) => `${/provider="([^"]*)"/.exec(l)?.[1]} ${l.slice(l.lastIndexOf(" ") + 1)}`)
      .sort();
    expect(hints).toEqual(["anthropic 0", "gemini 0", "openai 1"]);
  });

  it("headroom stats counts no hint for them, and shows each window's current headroom", async () => {
    const env = {
      ...Object.fromEntries(
        Object.entries(process.env).filter(
          ([name]) => !/^(REDIS_URL|CLICKHOUSE_|HEADROOM_DATA_DIR$|QUEUE_)/.test(name),
        ),
      ),
      // ClickHouse alone (no Redis named, no stack.json): the figures the reports stored, which
      // are what these defects were about (with the hot copy, stats shows /headroom's moment:
      // cli.stats-windows.test.ts).
      HEADROOM_DATA_DIR: dir,
      CLICKHOUSE_URL: s.p.config.CLICKHOUSE_URL,
      CLICKHOUSE_DATABASE: s.db,
    };
    const run = (args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          ["bin/headroom.mjs", ...args],
          { env, timeout: 120_000 },
          (err, stdout, stderr) =>
            resolve({ code: err ? Number(err.code ?? -1) : 0, stdout, stderr }),
        ),
      );
    const r = await run(["stats", "--json", "--project", k.project]);
    expect(r.code, r.stderr).toBe(0);
    const stats = JSON.parse(r.stdout) as {
      volume: { provider: string; reports: number; hints: number }[];
      windows: {
        provider: string;
        dimension: string;
        window: string;
        limit: number | null;
        remaining: number | null;
      }[];
    };
    expect(
      Object.fromEntries(stats.volume.map((v) => [v.provider, [v.reports, v.hints].map(Number)])),
    ).toEqual({ anthropic: [3, 0], gemini: [1, 0], openai: [1, 1] });
    expect(stats.windows).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          provider: "anthropic",
          dimension: "output_tokens",
          window: "1m",
          limit: 8000,
          remaining: 95,
        }),
        expect.objectContaining({ provider: "gemini", dimension: "input_tokens", remaining: 0 }),
      ]),
    );
    // As a person reads it.
    const text = await run(["stats", "--project", k.project]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/anthropic .*output_tokens +1m +95\/8000 \(98\.8% used\)/);
  }, 180_000);

  it("migrations 10 and 13 count the reports stored before them by the same definition", async () => {
    // A database as the previous release left it (every migration but this one: the rows copied
    // below are of this release's shape, whose columns later migrations add), holding this
    // project's reports as they were stored: its old column counted all but one as hints.
    const mine = MIGRATIONS.find((m) => m.name === "figureless_hints")?.version ?? 0;
    // Migration 13 (usage) redefines hints over migration 10's column: it comes after, as here.
    const usage = MIGRATIONS.find((m) => m.name === "report_usage")?.version ?? 0;
    const before = `${s.db}_old_${uniqueId()}`;
    const ctx = { db: before, retentionDays: 30 };
    await migrate(
      s.p.client,
      ctx,
      () => {},
      // The later ones (14: counted reports) read migration 13's columns: applied after it.
      MIGRATIONS.filter((m) => m.version !== mine && m.version < usage),
    );
    await s.p.client.command({
      query: `INSERT INTO ${before}.reports SELECT * EXCEPT (usage_input_tokens,
          usage_output_tokens, usage_cached_tokens)
        FROM ${s.db}.reports WHERE project_id = {p:String}`,
      query_params: { p: k.project },
    });
    const hints = async (column: string) =>
      s.sql<{ provider: string; n: string }>(
        `SELECT provider, toString(sum(${column})) AS n FROM ${before}.reports_minute
        WHERE project_id = {p:String} GROUP BY provider ORDER BY provider`,
        { p: k.project },
      );
    expect((await hints("provider_hints")).map((r) => `${r.provider} ${r.n}`)).toEqual([
      "anthropic 3",
      "gemini 1",
      "openai 1",
    ]);
    expect(await migrate(s.p.client, ctx)).toEqual(expect.arrayContaining([mine, usage]));
    for (const column of ["figureless_reports", "figureless_reports_2"])
      expect((await hints(column)).map((r) => `${r.provider} ${r.n}`)).toEqual([
        "anthropic 0",
        "gemini 0",
        "openai 1",
      ]);
    await s.p.client.command({ query: `DROP DATABASE ${before}` });
  });
});

interface ReportItem {
  id: string;
  provider: string;
  windows: {
    dimension: string;
    window: string | null;
    limit: number | null;
    remaining: number | null;
    used_pct: number | null;
    resets_at: string | null;
  }[];
  error: { summary: string; status: number | null; rate_limited: boolean } | null;
}

describe("a raw report shows its windows and the provider's error", () => {
  it("/api/v1/reports lists each report's windows, and its error in a line", async () => {
    const { items } = await json<{ items: ReportItem[] }>("/api/v1/reports");
    const byId = new Map(items.map((i) => [i.id, i]));
    const [anthropic, , anthropic429, gemini, hint] = ids.map((id) => byId.get(id));
    expect(anthropic?.windows).toEqual(
      expect.arrayContaining([
        {
          dimension: "output_tokens",
          window: "1m",
          source: "stated",
          limit: 8000,
          remaining: 95,
          used_pct: 98.81,
          resets_at: iso(Date.parse(RESET)),
        },
        expect.objectContaining({ dimension: "requests", limit: 50, remaining: 41 }),
        expect.objectContaining({ dimension: "input_tokens", limit: 30_000, remaining: 21_000 }),
      ]),
    );
    expect(anthropic?.error).toBeNull();
    expect(anthropic429?.error).toMatchObject({
      summary: "rate limited (rate_limit_error)",
      rate_limited: true,
    });
    expect(gemini?.windows.map((w) => [w.dimension, w.window, w.limit, w.remaining])).toEqual([
      ["input_tokens", "1m", 3_000_000, 0],
    ]);
    expect(gemini?.error).toEqual({
      summary: "429 rate limited (RESOURCE_EXHAUSTED)",
      status: 429,
      rate_limited: true,
      kind: "RESOURCE_EXHAUSTED",
    });
    expect(hint).toMatchObject({ windows: [], error: null });
  });
});
