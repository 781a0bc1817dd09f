import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { headroomFamilies, seriesKey } from "../../src/api/metrics/families.js";
import type { MetricView, SeriesView } from "../../src/headroom/headroom-view.js";

// docs/prometheus.md's table of metrics is kept in sync with what the exporter writes: every
// family, with its type, and no metric the exporter does not have.

const AT = Date.UTC(2030, 0, 2, 12, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();

/** A figure with every value present, so that every family has a sample. */
const full: MetricView = {
  limit: 500,
  remaining: 125,
  used_pct: 75,
  resets_at: iso(AT + 30_000),
  resets_in_s: 30,
  resets_unknown: null,
  reset_since_report: true,
  burn_per_s: 2,
  burn: 2,
  burn_unit: "requests/s",
  burn_unknown: null,
  exhausted_at: iso(AT + 12_500),
  exhaustion_eta_s: 12.5,
  exhaustion_unknown: null,
};
const series: SeriesView = {
  provider: "openai",
  model: "gpt-4o",
  app: "chat",
  status: "ok",
  last_seen: iso(AT - 5_000),
  reported_at: iso(AT - 5_000),
  credits_reported_at: iso(AT - 5_000),
  requests: full,
  tokens: full,
  credits: full,
};

it("docs/prometheus.md lists every metric the exporter writes, with its type, and no other", () => {
  const families = headroomFamilies({
    at: AT,
    series: [series],
    counters: new Map([[seriesKey("openai", "gpt-4o", "chat"), { reports: 1, hints: 1, cost: 1 }]]),
    countersSince: Date.UTC(2030, 0, 2),
    maxSeries: 10,
  });
  for (const f of families) expect(f.samples.length, f.name).toBeGreaterThan(0);
  const exported = families
    .map((f) => [f.type === "counter" ? `${f.name}_total` : f.name, f.type])
    .sort();
  const doc = readFileSync("docs/prometheus.md", "utf8");
  const documented = [...doc.matchAll(/^\| `(headroom_[a-z_]+)` \| (gauge|counter) \|/gm)]
    .map(([, name, type]) => [name, type])
    .sort();
  expect(documented).toEqual(exported);
  expect(exported.map(([name]) => name)).toContain("headroom_window_reset");
});
