import { describe, expect, it } from "vitest";
import { negotiate, writeExposition } from "../../src/api/metrics/exposition.js";
import { headroomFamilies, seriesKey } from "../../src/api/metrics/families.js";
import type { MetricView, SeriesView } from "../../src/headroom/headroom-view.js";
import { requireBinaries } from "../helpers/prometheus.js";

// The exporter's pure core: content negotiation, both text formats, escaping, absent figures,
// stale series and the per-project cap.

const AT = Date.UTC(2030, 0, 2, 12, 0, 0);
const DAY = Date.UTC(2030, 0, 2);
const PROMETHEUS_ACCEPT =
  "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

const none: MetricView = {
  limit: null,
  remaining: null,
  used_pct: null,
  resets_at: null,
  resets_in_s: null,
  resets_unknown: "no_figures",
  reset_since_report: false,
  burn_per_s: null,
  burn: null,
  burn_unit: "requests/s",
  burn_unknown: "no_figures",
  exhausted_at: null,
  exhaustion_eta_s: null,
  exhaustion_unknown: "no_figures",
};

function series(over: Partial<SeriesView> = {}): SeriesView {
  return {
    provider: "openai",
    model: "gpt-4o",
    app: "chat",
    status: "ok",
    last_seen: new Date(AT - 5_000).toISOString(),
    reported_at: new Date(AT - 5_000).toISOString(),
    credits_reported_at: null,
    requests: {
      limit: 500,
      remaining: 125,
      used_pct: 75,
      resets_at: new Date(AT + 30_000).toISOString(),
      resets_in_s: 30,
      resets_unknown: null,
      reset_since_report: false,
      burn_per_s: 2,
      burn: 2,
      burn_unit: "requests/s",
      burn_unknown: null,
      exhausted_at: new Date(AT + 12_500).toISOString(),
      exhaustion_eta_s: 12.5,
      exhaustion_unknown: null,
    },
    tokens: none,
    credits: none,
    ...over,
  };
}

const render = (s: SeriesView[], format: "openmetrics" | "text", maxSeries = 100) =>
  writeExposition(
    headroomFamilies({
      at: AT,
      series: s,
      counters: new Map([
        [seriesKey("openai", "gpt-4o", "chat"), { reports: 7, hints: 1, cost: 0.5 }],
      ]),
      countersSince: DAY,
      maxSeries,
    }),
    format,
  );

const sampleLines = (text: string, name: string) =>
  text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));

describe("negotiate", () => {
  it("serves OpenMetrics to Prometheus and the 0.0.4 text to everyone else", () => {
    expect(negotiate(PROMETHEUS_ACCEPT)).toBe("openmetrics");
    expect(negotiate("application/openmetrics-text")).toBe("openmetrics");
    expect(negotiate("text/plain;version=0.0.4")).toBe("text");
    expect(negotiate(undefined)).toBe("text");
    expect(negotiate("application/json")).toBe("text");
    expect(negotiate("application/openmetrics-text;version=1.0.0;q=0.2,text/plain;q=0.9")).toBe(
      "text",
    );
    expect(negotiate("application/openmetrics-text;q=0,text/plain")).toBe("text");
  });
});

describe("exposition", () => {
  it("writes OpenMetrics: counters with _total and _created, units, # EOF last", () => {
    const text = render([series()], "openmetrics");
    expect(text.endsWith("# EOF\n")).toBe(true);
    expect(text).toContain("# TYPE headroom_reports counter\n");
    expect(text).toContain(
      'headroom_reports_total{provider="openai",model="gpt-4o",app="chat"} 7\n',
    );
    expect(text).toContain(
      `headroom_reports_created{provider="openai",model="gpt-4o",app="chat"} ${DAY / 1000}\n`,
    );
    expect(text).toContain("# UNIT headroom_reset_timestamp_seconds seconds\n");
    expect(text).toContain(
      `headroom_exhaustion_timestamp_seconds{provider="openai",model="gpt-4o",app="chat",kind="requests",dimension="requests",window="unknown"} ${AT / 1000 + 12.5}\n`,
    );
    expect(sampleLines(text, "headroom_used_ratio")).toEqual([
      'headroom_used_ratio{provider="openai",model="gpt-4o",app="chat",kind="requests",dimension="requests",window="unknown"} 0.75',
    ]);
  });

  it("writes the 0.0.4 text: the counter's family is named with _total, no _created, no EOF", () => {
    const text = render([series()], "text");
    expect(text).toContain("# TYPE headroom_reports_total counter\n");
    expect(text).not.toContain("_created");
    expect(text).not.toContain("# UNIT");
    expect(text).not.toContain("# EOF");
    for (const line of text.trim().split("\n")) {
      if (!line.startsWith("#")) expect(line).toMatch(/^headroom_[a-z_]+(\{.*\})? -?[0-9.e+]+$/);
    }
  });

  it("writes a ratio as its decimal, without binary float noise (0.78 % used is 0.0078)", () => {
    const used = (pct: number) => ({ ...series().requests, limit: 1000, used_pct: pct });
    const text = render([series({ requests: used(0.78) })], "text");
    expect(0.78 / 100).toBe(0.0078000000000000005); // what the gauge computes
    expect(sampleLines(text, "headroom_used_ratio")).toEqual([
      'headroom_used_ratio{provider="openai",model="gpt-4o",app="chat",kind="requests",dimension="requests",window="unknown"} 0.0078',
    ]);
    const gauge = (value: number) =>
      writeExposition(
        [{ name: "g", type: "gauge", help: "h", samples: [{ labels: {}, value }] }],
        "openmetrics",
      ).split("\n")[2];
    expect(gauge(0.1 + 0.2)).toBe("g 0.3");
    expect(gauge(1.1 * 3)).toBe("g 3.3");
    // What is exact stays exact: integers to 2^53, a timestamp's milliseconds, tiny and huge.
    expect(gauge(2 ** 53)).toBe("g 9007199254740992");
    expect(gauge(1893585600.123)).toBe("g 1893585600.123");
    expect(gauge(123456789.123456)).toBe("g 123456789.123456");
    expect(gauge(1e-7)).toBe("g 1e-7");
    expect(gauge(1.5e300)).toBe("g 1.5e+300");
    expect(gauge(-0)).toBe("g 0");
  });

  it("escapes label values: backslash, double quote and newline", () => {
    const text = render([series({ app: 'a"b\\c\nd', model: null })], "openmetrics");
    expect(text).toContain(
      'headroom_remaining{provider="openai",model="",app="a\\"b\\\\c\\nd",kind="requests",dimension="requests",window="unknown"} 125\n',
    );
  });

  it("leaves out every sample of an absent figure: no sentinel, no NaN", () => {
    const hintsOnly = series({
      provider: "groq",
      model: null,
      reported_at: null,
      requests: none,
    });
    const text = render([hintsOnly], "openmetrics");
    for (const name of [
      "headroom_limit",
      "headroom_remaining",
      "headroom_used_ratio",
      "headroom_reset_timestamp_seconds",
      "headroom_last_report_timestamp_seconds",
      "headroom_exhaustion_timestamp_seconds",
    ]) {
      expect(sampleLines(text, name)).toEqual([]);
      // A family with no sample is not announced either.
      expect(text).not.toContain(`# TYPE ${name} `);
    }
    expect(text).not.toMatch(/NaN|Inf|e\+18/);
    expect(sampleLines(text, "headroom_last_seen_timestamp_seconds")).toHaveLength(1);
    // No counter row today: the counters are 0, not absent.
    expect(sampleLines(text, "headroom_reports_total")).toEqual([
      'headroom_reports_total{provider="groq",model="",app="chat"} 0',
    ]);
  });

  it("gives one status sample per state, 1 for the series' own", () => {
    const text = render([series({ status: "critical" })], "openmetrics");
    expect(sampleLines(text, "headroom_status")).toEqual([
      'headroom_status{provider="openai",model="gpt-4o",app="chat",status="ok"} 0',
      'headroom_status{provider="openai",model="gpt-4o",app="chat",status="warning"} 0',
      'headroom_status{provider="openai",model="gpt-4o",app="chat",status="critical"} 1',
    ]);
  });
});

describe("stale series and the cap", () => {
  it("leaves stale series out", () => {
    const text = render([series(), series({ app: "old", status: "stale" })], "openmetrics");
    expect(text).not.toContain('app="old"');
    expect(sampleLines(text, "headroom_series_exported")).toEqual(["headroom_series_exported 1"]);
    expect(sampleLines(text, "headroom_series_dropped")).toEqual(["headroom_series_dropped 0"]);
  });

  it("keeps the most pressing, then the busiest series, and counts the rest", () => {
    const flood = Array.from({ length: 20 }, (_, i) => series({ app: `random-${i}` }));
    const watched = series();
    const critical = series({ app: "batch", status: "critical" });
    const text = render([...flood, watched, critical], "openmetrics", 2);
    const apps = sampleLines(text, "headroom_last_seen_timestamp_seconds").map(
      (l) => /app="([^"]*)"/.exec(l)?.[1],
    );
    expect(apps.sort()).toEqual(["batch", "chat"]);
    expect(sampleLines(text, "headroom_series_dropped")).toEqual(["headroom_series_dropped 20"]);
    expect(sampleLines(text, "headroom_series_exported")).toEqual(["headroom_series_exported 2"]);
  });
});

describe("the exporter's tests without Prometheus", () => {
  it("fail with one line naming the package to install", () => {
    expect(() => requireBinaries("sh", "no-such-binary-for-headroom")).toThrow(
      /^no-such-binary-for-headroom not found: apt-get install prometheus \(Debian's package: prometheus and promtool 2\.42\)$/,
    );
    expect(() => requireBinaries("sh")).not.toThrow();
  });
});

describe("the pool label", () => {
  const pooled = (app: string) => series({ app });
  const families = (maxSeries: number) =>
    headroomFamilies({
      at: AT,
      series: ["agent", "chat", "rag", "solo"].map(pooled),
      counters: new Map(),
      countersSince: DAY,
      maxSeries,
      // Three members of one pool; `solo` is its app alone.
      pools: new Map(
        ["agent", "chat", "rag"].map((app) => [seriesKey("openai", "gpt-4o", app), "0123456789ab"]),
      ),
    });

  it("names each member series' pool by its 12-hex id on every per-series family; none on an app alone", () => {
    const text = writeExposition(families(100), "text");
    for (const name of ["headroom_used_ratio", "headroom_status", "headroom_reports_total"]) {
      const lines = sampleLines(text, name);
      for (const app of ["agent", "chat", "rag"]) {
        expect(lines.some((l) => l.includes(`app="${app}",pool="0123456789ab"`))).toBe(true);
      }
      expect(lines.filter((l) => l.includes('app="solo"')).every((l) => !l.includes("pool="))).toBe(
        true,
      );
    }
  });

  it("adds no series: the cap of 2 keeps 2 series, whatever their pools", () => {
    const text = writeExposition(families(2), "text");
    expect(sampleLines(text, "headroom_series_exported")).toEqual(["headroom_series_exported 2"]);
    expect(sampleLines(text, "headroom_last_seen_timestamp_seconds")).toHaveLength(2);
    const pools = new Set(text.match(/pool="[^"]*"/g) ?? []);
    expect(pools.size).toBeLessThanOrEqual(2);
  });
});
