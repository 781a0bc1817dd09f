import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SeriesView } from "../../src/headroom/headroom-view.js";
import { eventually } from "../helpers/eventually.js";
import {
  type Prometheus,
  promtoolCheckMetrics,
  requireBinaries,
  startPrometheus,
} from "../helpers/prometheus.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// /api/v1/metrics scraped by a real Prometheus: reports go in through the real edge and worker,
// two projects are scraped with their own read keys, and PromQL over Prometheus's HTTP API must
// give what the read API gives for each (and never the other's series). A third project floods
// distinct app names against the series cap. promtool checks a scrape in the 0.0.4 format.

const MAX_SERIES = 40;
const FLOOD_APPS = 150;
let s: ReadStack;
let prom: Prometheus;
let a: ProjectKeys;
let b: ProjectKeys;
let flood: ProjectKeys;
let started: number;

const limits = (over: Record<string, number | null> = {}) => ({
  requests_limit: null,
  requests_remaining: null,
  tokens_limit: null,
  tokens_remaining: null,
  reset_requests_ms: null,
  reset_tokens_ms: null,
  ...over,
});
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

function projectA(): Record<string, unknown>[] {
  const burning = [100, 90, 80].map((remaining, i) => ({
    app: "chat",
    provider: "openai",
    model: "gpt-4o",
    timestamp: ago(120_000 - i * 55_000),
    limits: limits({
      requests_limit: 200,
      requests_remaining: remaining,
      tokens_limit: 30_000,
      tokens_remaining: 29_000 - i * 1_000,
      reset_requests_ms: 3_600_000,
      reset_tokens_ms: 3_600_000,
    }),
  }));
  return [
    ...burning,
    {
      app: "batch",
      provider: "anthropic",
      model: "claude",
      limits: limits({ requests_limit: 50, requests_remaining: 4, reset_requests_ms: 20_000 }),
      credits: { credits_limit: 100, credits_remaining: 61.5, request_cost: 0.25 },
    },
    {
      app: "batch",
      provider: "anthropic",
      model: "claude",
      limits: limits(),
      credits: { credits_limit: 100, credits_remaining: 61.25, request_cost: 0.25 },
    },
    // Last seen before the stale interval (READ_STALE_AFTER_S, 15 min): never exported.
    {
      app: "gone",
      provider: "openai",
      model: "gpt-4o",
      timestamp: ago(20 * 60_000),
      limits: limits({ requests_limit: 10, requests_remaining: 9 }),
    },
    // Only provider hints: no figure, so no gauge but the series' own.
    { provider: "groq", model: null, limits: {} },
    { provider: "groq", model: null, limits: {} },
  ];
}

function projectB(): Record<string, unknown>[] {
  return [
    {
      // Label values Prometheus must get back exactly: quote, backslash, newline, non-ASCII.
      app: 'b "quoted" \\ back\nslash é',
      provider: "openai",
      model: "gpt-4o",
      limits: limits({ requests_limit: 1_000, requests_remaining: 100 }),
    },
    {
      app: "b-only",
      provider: "mistral",
      model: "large",
      limits: limits({ tokens_limit: 5_000, tokens_remaining: 4_999, reset_tokens_ms: 60_000 }),
    },
  ];
}

beforeAll(async () => {
  requireBinaries("prometheus", "promtool");
  started = Date.now() / 1000;
  s = await startReadStack({
    READ_METRICS_MAX_SERIES: String(MAX_SERIES),
    // Three scrapes a second and the test's own reads share each key's bucket.
    READ_RATE_PER_S: "1000",
    READ_BURST: "1000",
  });
  [a, b, flood] = [await s.project(), await s.project(), await s.project()];
  await s.send(a.report, projectA());
  await s.send(b.report, projectB());
  const floodReports = Array.from({ length: FLOOD_APPS }, (_, i) => ({
    app: `random-${i}-${Math.random().toString(36).slice(2)}`,
    provider: "openai",
    model: "gpt-4o",
    limits: limits({ requests_limit: 100, requests_remaining: 99 }),
  }));
  const watched = Array.from({ length: 5 }, (_, i) => ({
    app: "main",
    provider: "openai",
    model: "gpt-4o",
    limits: limits({ requests_limit: 100, requests_remaining: 90 - i }),
  }));
  await s.send(flood.report, [...floodReports, ...watched]);
  await s.stored(a.project, projectA().length);
  await s.stored(b.project, projectB().length);
  await s.stored(flood.project, FLOOD_APPS + watched.length);

  await s.api.app.listen({ port: 0, host: "127.0.0.1" });
  const target = `127.0.0.1:${(s.api.app.server.address() as AddressInfo).port}`;
  prom = await startPrometheus(
    [
      { name: "a", target, path: "/api/v1/metrics", credentials: a.read },
      { name: "b", target, path: "/api/v1/metrics", credentials: b.read },
      { name: "flood", target, path: "/api/v1/metrics", credentials: flood.read },
    ],
    1,
  );
}, 120_000);

afterAll(async () => {
  await prom?.close();
  await s?.close();
});

/** A series' labels as Prometheus stores them: an empty `model` is no label at all. */
function labelKey(labels: object, extra: string[] = []): string {
  const l = labels as Record<string, unknown>;
  return JSON.stringify([l.provider, l.model ?? "", l.app, ...extra.map((k) => l[k])]);
}

async function headroomOf(key: string): Promise<SeriesView[]> {
  const res = await s.get("/api/v1/headroom", key);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { series: SeriesView[] }).series;
}

async function promValues(promql: string, extra: string[] = []): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const v of await prom.query(promql)) out.set(labelKey(v.metric, extra), Number(v.value[1]));
  return out;
}

const KINDS = ["requests", "tokens", "credits"] as const;

/** What the read API says each kind gauge should be, by provider, model, app and kind. */
function expectedGauges(series: SeriesView[]) {
  const gauges = {
    headroom_limit: new Map<string, number>(),
    headroom_remaining: new Map<string, number>(),
    headroom_used_ratio: new Map<string, number>(),
    headroom_reset_timestamp_seconds: new Map<string, number>(),
    headroom_last_report_timestamp_seconds: new Map<string, number>(),
  };
  for (const sv of series) {
    for (const kind of KINDS) {
      const m = sv[kind];
      const key = labelKey({ ...sv, kind }, ["kind"]);
      if (m.limit !== null) gauges.headroom_limit.set(key, m.limit);
      if (m.remaining !== null) gauges.headroom_remaining.set(key, m.remaining);
      if (m.used_pct !== null) gauges.headroom_used_ratio.set(key, m.used_pct / 100);
      if (m.resets_at !== null) {
        gauges.headroom_reset_timestamp_seconds.set(key, Date.parse(m.resets_at) / 1000);
      }
      const reported = kind === "credits" ? sv.credits_reported_at : sv.reported_at;
      if ((m.limit !== null || m.remaining !== null) && reported !== null) {
        gauges.headroom_last_report_timestamp_seconds.set(key, Date.parse(reported) / 1000);
      }
    }
  }
  return gauges;
}

async function expectProjectInPrometheus(job: string, k: ProjectKeys) {
  const all = await headroomOf(k.read);
  const series = all.filter((sv) => sv.status !== "stale");
  const fresh = new Set(series.map((sv) => labelKey(sv)));
  expect(series.length).toBeGreaterThan(0);
  for (const [name, expected] of Object.entries(expectedGauges(series))) {
    expect(await promValues(`${name}{job="${job}"}`, ["kind"]), name).toEqual(expected);
  }
  expect(await promValues(`headroom_last_seen_timestamp_seconds{job="${job}"}`)).toEqual(
    new Map(series.map((sv) => [labelKey(sv), Date.parse(sv.last_seen) / 1000])),
  );
  expect(await promValues(`headroom_status{job="${job}"} == 1`, ["status"])).toEqual(
    new Map(series.map((sv) => [labelKey(sv, ["status"]), 1])),
  );
  // The time to exhaustion moves with the scrape's time: the estimate is the scrape's time
  // plus the read API's seconds to exhaustion.
  const etas = new Map<string, number>();
  for (const sv of series) {
    for (const kind of KINDS) {
      const eta = sv[kind].exhaustion_eta_s;
      if (eta !== null) etas.set(labelKey({ ...sv, kind }, ["kind"]), eta);
    }
  }
  const exhaustion = await promValues(`headroom_exhaustion_timestamp_seconds{job="${job}"}`, [
    "kind",
  ]);
  expect([...exhaustion.keys()].sort()).toEqual([...etas.keys()].sort());
  for (const [key, at] of exhaustion) {
    const scrapedAt = at - (etas.get(key) ?? 0);
    expect(scrapedAt).toBeGreaterThanOrEqual(started);
    expect(scrapedAt).toBeLessThanOrEqual(Date.now() / 1000);
  }

  // Counters: today's rollup, as /api/v1/usage gives it for today's window.
  const today = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000).toISOString();
  const usage = await s.get(
    `/api/v1/usage?from=${today}&window=day&group_by=provider,model,app`,
    k.read,
  );
  expect(usage.statusCode, usage.body).toBe(200);
  const points = (
    usage.json() as {
      points: {
        provider: string;
        model: string | null;
        app: string;
        reports: number;
        provider_hints: number;
        cost: number;
      }[];
    }
  ).points.filter((p) => fresh.has(labelKey(p)));
  const counters = {
    headroom_reports_total: (p: (typeof points)[number]) => p.reports,
    headroom_provider_hints_total: (p: (typeof points)[number]) => p.provider_hints,
    headroom_cost_total: (p: (typeof points)[number]) => p.cost,
  };
  for (const [name, pick] of Object.entries(counters)) {
    expect(await promValues(`${name}{job="${job}"}`), name).toEqual(
      new Map(points.map((p) => [labelKey(p), pick(p)])),
    );
  }
  return all;
}

describe("/api/v1/metrics scraped by Prometheus", () => {
  it("takes a read key only, and no parameters", async () => {
    const report = await s.get("/api/v1/metrics", a.report);
    expect(report.statusCode).toBe(403);
    expect(report.json().error).toBe("insufficient_scope");
    expect(report.headers["www-authenticate"]).toBe('Bearer error="insufficient_scope"');
    expect((await s.get("/api/v1/metrics")).statusCode).toBe(401);
    const param = await s.get("/api/v1/metrics?app=chat", a.read);
    expect(param.statusCode).toBe(400);
    expect(param.json()).toMatchObject({
      error: "invalid_query",
      message: "app: unknown parameter",
    });
  });

  it("passes promtool check metrics", async () => {
    for (const k of [a, b, flood]) {
      const res = await s.get("/api/v1/metrics", k.read, { accept: "text/plain" });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
      expect(promtoolCheckMetrics(res.body)).toEqual({ status: 0, output: "" });
    }
    const om = await s.get("/api/v1/metrics", a.read, {
      accept: "application/openmetrics-text; version=1.0.0",
    });
    expect(om.headers["content-type"]).toBe(
      "application/openmetrics-text; version=1.0.0; charset=utf-8",
    );
    expect(om.body.endsWith("# EOF\n")).toBe(true);
    // Prometheus asks for gzip.
    const gz = await s.get("/api/v1/metrics", a.read, { "accept-encoding": "gzip" });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(promtoolCheckMetrics(gunzipSync(gz.rawPayload).toString("utf8"))).toEqual({
      status: 0,
      output: "",
    });
  });

  it("gives in PromQL the figures the read API gives, for each project with its own key", async () => {
    // Prometheus scraped OpenMetrics from the exporter without an error.
    await eventually(
      async () => {
        const up = await promValues('up{job=~"a|b|flood"}', ["job"]);
        expect([...up.values()]).toEqual([1, 1, 1]);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const allA = await eventually(() => expectProjectInPrometheus("a", a), {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    const allB = await eventually(() => expectProjectInPrometheus("b", b), {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    // The figures this test sent are there: a burning series, credits, hints only, escaping.
    expect(allA.map((sv) => [sv.app, sv.status === "stale"]).sort()).toEqual([
      ["batch", false],
      ["chat", false],
      ["default", false],
      ["gone", true],
    ]);
    expect(await prom.query('{job="a", app="gone"}')).toEqual([]);
    expect(allA.find((sv) => sv.app === "chat")?.requests.exhaustion_eta_s).not.toBeNull();
    expect(allB.map((sv) => sv.app).sort()).toEqual(['b "quoted" \\ back\nslash é', "b-only"]);
    // Never each other's series: no app of one project under the other's job.
    const appsByJob = async (job: string) =>
      new Set(
        (await prom.query(`{job="${job}", __name__=~"headroom_.+"}`)).map((v) => v.metric.app),
      );
    const [appsA, appsB] = [await appsByJob("a"), await appsByJob("b")];
    for (const app of appsB) if (app !== undefined) expect(appsA.has(app)).toBe(false);
    for (const app of appsA) if (app !== undefined) expect(appsB.has(app)).toBe(false);
  });

  it("holds the series cap under a flood of distinct app names", async () => {
    await eventually(
      async () => {
        expect(await promValues('headroom_series_dropped{job="flood"}')).toEqual(
          new Map([[labelKey({}), FLOOD_APPS + 1 - MAX_SERIES]]),
        );
        const apps = await prom.query('headroom_last_seen_timestamp_seconds{job="flood"}');
        expect(apps).toHaveLength(MAX_SERIES);
        // The busiest series stays in.
        expect(apps.some((v) => v.metric.app === "main")).toBe(true);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Every family is bounded by the cap: at most one sample per kind, status or counter.
    const perSeries = await prom.query(
      'max(count by (__name__) ({job="flood", __name__=~"headroom_.+", __name__!~"headroom_status|headroom_series_.+"}))',
    );
    expect(Number(perSeries[0]?.value[1])).toBeLessThanOrEqual(MAX_SERIES * KINDS.length);
    // A series is at most 18 kind gauges, its last-seen time, 3 states, 3 counters and their
    // 3 `_created`; the scrape adds the two series gauges.
    const scraped = await prom.query('scrape_samples_scraped{job="flood"}');
    expect(Number(scraped[0]?.value[1])).toBeLessThanOrEqual(MAX_SERIES * 28 + 2);
  });

  it("runs the Grafana dashboard's queries, which name only metrics the exporter writes", async () => {
    const dashboard = JSON.parse(readFileSync("docs/grafana/headroom-dashboard.json", "utf8")) as {
      panels: { title: string; targets: { expr: string }[] }[];
      templating: { list: { query?: string | { query: string } }[] };
    };
    // Waits for the first scrapes (tests may run in any order).
    const exported = await eventually(
      async () => {
        const names = new Set(
          (await prom.query('{job="a", __name__=~"headroom_.+"}')).map((v) => v.metric.__name__),
        );
        expect(names.has("headroom_exhaustion_timestamp_seconds")).toBe(true);
        return names;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => [p.title, t.expr]));
    expect(exprs.length).toBeGreaterThan(10);
    for (const [title, expr = ""] of exprs) {
      for (const name of expr.match(/headroom_[a-z_]+/g) ?? []) {
        expect(exported.has(name), `${title}: ${name}`).toBe(true);
      }
      // Every variable set to "All" (a regex) as Grafana sends it.
      const promql = expr.replace(/\$(job|provider|app)\b/g, ".*");
      await expect(prom.query(promql), title).resolves.toBeInstanceOf(Array);
    }
    // The main panels have data for the test's projects.
    for (const title of ["Headroom per provider (requests)", "Used share per series"]) {
      const expr = exprs.find(([t]) => t === title)?.[1] ?? "";
      expect(
        (await prom.query(expr.replace(/\$(job|provider|app)\b/g, ".*"))).length,
        title,
      ).toBeGreaterThan(0);
    }
  });
});
