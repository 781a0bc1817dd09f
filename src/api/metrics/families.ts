import { metricOfDimension } from "../../alerts/rule.js";
import type { MetricView, SeriesView, Status } from "../../headroom/headroom-view.js";
import type { Family, Sample } from "./exposition.js";

// A project's headroom as metric families: the gauges come from /api/v1/headroom's series views,
// the counters from today's row of the daily rollup. Pure. A series that has gone stale is left
// out, so it disappears from Prometheus; past the cap, the least pressing series are dropped and
// counted.
//
// The per-window gauges have one sample per window of a series: labels `dimension` (requests,
// tokens, input_tokens, …), `window` (its length, `1m`, `1d`, …, or `unknown` when the provider
// did not say) and `kind` (the dimension's family: requests, tokens or credits — input and output
// tokens are tokens), so that queries by `kind` keep working. Cardinality: a series keeps at most
// MAX_WINDOWS_PER_SERIES windows (hot-series.ts), and the series are capped per project.
//
// `headroom_window_source` says where each window's figures come from (label `source`: one of
// four words, never a tenant's).
//
// Every per-series sample has a `pool` label (docs/pools.md): the 12-hex id of the pool the series
// is in, as /api/v1/headroom names it; none (Prometheus's empty value) for a series that is its app
// alone. A series is in
// one pool, so the label adds no series: it is bounded by the same cap. It is an id the service
// made, never a tenant's string (the account is a keyed hash, a label goes through the hash too).

export const KINDS = ["requests", "tokens", "credits"] as const;
/** `stale` series are never exported, so the status gauge has these states. */
export const EXPORTED_STATUSES = ["ok", "warning", "critical"] as const;

export interface SeriesCounters {
  reports: number;
  hints: number;
  cost: number;
}

export interface FamiliesInput {
  /** The read API's `at` and series (readHeadroom). */
  at: number;
  series: SeriesView[];
  /** Today's counters by seriesKey(provider, model-as-stored, app). */
  counters: Map<string, SeriesCounters>;
  /** When today's counters started (the UTC day's start), Unix ms. */
  countersSince: number;
  maxSeries: number;
  /**
   * The pool (12-hex id) of each series that is in one (its reports name an account or a label),
   * by seriesKey; a series absent here is its app alone (`pool=""`).
   */
  pools?: Map<string, string>;
}

export const seriesKey = (provider: string, model: string, app: string) =>
  JSON.stringify([provider, model, app]);

const SEVERITY: Record<Status, number> = { critical: 0, warning: 1, ok: 2, stale: 3 };
const seconds = (iso: string | null) => (iso === null ? null : Date.parse(iso) / 1000);

function counterOf(input: FamiliesInput, s: SeriesView): SeriesCounters {
  return (
    input.counters.get(seriesKey(s.provider, s.model ?? "", s.app)) ?? {
      reports: 0,
      hints: 0,
      cost: 0,
    }
  );
}

/**
 * The series kept under the cap: the most pressing first (critical, warning, ok), then the
 * busiest today, then the most recently seen, so a flood of one-off names cannot push out
 * the series a team watches.
 */
export function keptSeries(input: FamiliesInput): { kept: SeriesView[]; dropped: number } {
  const fresh = input.series.filter((s) => s.status !== "stale");
  if (fresh.length <= input.maxSeries) return { kept: fresh, dropped: 0 };
  const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  const ranked = fresh
    .map((s) => ({
      s,
      severity: SEVERITY[s.status],
      reports: counterOf(input, s).reports,
      key: seriesKey(s.provider, s.model ?? "", s.app),
    }))
    .sort(
      (a, b) =>
        a.severity - b.severity ||
        b.reports - a.reports ||
        cmp(b.s.last_seen, a.s.last_seen) ||
        cmp(a.key, b.key),
    );
  const kept = new Set(ranked.slice(0, input.maxSeries).map((r) => r.s));
  return { kept: fresh.filter((s) => kept.has(s)), dropped: fresh.length - kept.size };
}

type Kind = (typeof KINDS)[number];
/** `reportedAt`: when this window's figures were last reported (ISO), or null. */
type KindGauge = (m: MetricView, reportedAt: string | null) => number | null;

/** The `window` label of a window whose length the provider did not state. */
export const UNKNOWN_WINDOW = "unknown";

interface ExportedWindow {
  view: MetricView;
  kind: Kind;
  dimension: string;
  window: string;
  source: string;
  reportedAt: string | null;
}

/** A series' windows; a view without any (made before windows) gives its three metrics. */
function windowsOf(s: SeriesView): ExportedWindow[] {
  if (s.windows && s.windows.length > 0) {
    return s.windows.map((w) => ({
      view: w,
      kind: metricOfDimension(w.dimension),
      dimension: w.dimension,
      window: w.window ?? UNKNOWN_WINDOW,
      source: w.source,
      reportedAt: w.reported_at,
    }));
  }
  return KINDS.map((kind) => ({
    view: s[kind],
    kind,
    dimension: kind,
    window: UNKNOWN_WINDOW,
    source: "stated",
    reportedAt: kind === "credits" ? s.credits_reported_at : s.reported_at,
  }));
}

const KIND_GAUGES: { name: string; help: string; unit?: string; value: KindGauge }[] = [
  {
    name: "headroom_limit",
    help: "The provider's limit for the window (requests, tokens) or the credit limit, as last reported.",
    value: (m) => m.limit,
  },
  {
    name: "headroom_remaining",
    help: "What is left of the limit, as last reported.",
    value: (m) => m.remaining,
  },
  {
    name: "headroom_used_ratio",
    help: "The share of the limit used (0-1), from the last reported limit and remaining.",
    unit: "ratio",
    value: (m) => (m.used_pct === null ? null : Math.min(1, m.used_pct / 100)),
  },
  {
    name: "headroom_reset_timestamp_seconds",
    help: "When the provider's window resets (Unix time).",
    unit: "seconds",
    value: (m) => seconds(m.resets_at),
  },
  {
    name: "headroom_last_report_timestamp_seconds",
    help: "When this window's figures were last reported (Unix time).",
    unit: "seconds",
    value: (m, reportedAt) =>
      m.limit === null && m.remaining === null ? null : seconds(reportedAt),
  },
  {
    name: "headroom_exhaustion_timestamp_seconds",
    help: "When the remaining headroom runs out at the recent burn rate, if before the reset (Unix time).",
    unit: "seconds",
    value: (m) => seconds(m.exhausted_at),
  },
  {
    name: "headroom_window_reset",
    help: "1 when the provider's window has reset since the figures were reported (they are the previous window's), else 0.",
    value: (m) => (m.limit === null && m.remaining === null ? null : m.reset_since_report ? 1 : 0),
  },
];

export function headroomFamilies(input: FamiliesInput): Family[] {
  const { kept, dropped } = keptSeries(input);
  const labelsOf = (s: SeriesView): Record<string, string> => {
    const labels: Record<string, string> = {
      provider: s.provider,
      model: s.model ?? "",
      app: s.app,
    };
    const pool = input.pools?.get(seriesKey(s.provider, s.model ?? "", s.app));
    // Unpooled: no label, which Prometheus stores as `pool=""` would be (both match pool="").
    if (pool !== undefined) labels.pool = pool;
    return labels;
  };
  const windows = kept.map((s) => ({ s, windows: windowsOf(s) }));
  const families: Family[] = KIND_GAUGES.map((g) => ({
    name: g.name,
    type: "gauge",
    help: g.help,
    unit: g.unit,
    samples: windows.flatMap(({ s, windows }) =>
      windows.flatMap((w): Sample[] => {
        const v = g.value(w.view, w.reportedAt);
        if (v === null) return [];
        const labels = { ...labelsOf(s), kind: w.kind, dimension: w.dimension, window: w.window };
        return [{ labels, value: v }];
      }),
    ),
  }));
  families.push(
    {
      // An info gauge, so that a window whose source changes (learned, then counted once its
      // retry delay passes) keeps its series in the gauges above.
      name: "headroom_window_source",
      type: "gauge",
      help: "1 for where the window's figures come from: stated, learned, declared or counted (a floor of what was used).",
      samples: windows.flatMap(({ s, windows }) =>
        windows.map((w) => ({
          labels: {
            ...labelsOf(s),
            kind: w.kind,
            dimension: w.dimension,
            window: w.window,
            source: w.source,
          },
          value: 1,
        })),
      ),
    },
    {
      name: "headroom_last_seen_timestamp_seconds",
      type: "gauge",
      help: "When the series last reported anything, provider hints included (Unix time).",
      unit: "seconds",
      samples: kept.map((s) => ({ labels: labelsOf(s), value: Date.parse(s.last_seen) / 1000 })),
    },
    {
      name: "headroom_status",
      type: "gauge",
      help: "1 for the series' alert status (by the project's alert rules, else 70/90 % used), 0 for the others.",
      samples: kept.flatMap((s) =>
        EXPORTED_STATUSES.map((status) => ({
          labels: { ...labelsOf(s), status },
          value: s.status === status ? 1 : 0,
        })),
      ),
    },
  );
  const created = input.countersSince / 1000;
  const counter = (name: string, help: string, pick: (c: SeriesCounters) => number): Family => ({
    name,
    type: "counter",
    help,
    samples: kept.map((s) => ({ labels: labelsOf(s), value: pick(counterOf(input, s)), created })),
  });
  families.push(
    counter("headroom_reports", "Reports received since 00:00 UTC.", (c) => c.reports),
    counter(
      "headroom_provider_hints",
      "Provider hints (reports with no figures) received since 00:00 UTC.",
      (c) => c.hints,
    ),
    counter(
      "headroom_cost",
      "Reported request cost since 00:00 UTC, in the provider's unit (usually USD).",
      (c) => c.cost,
    ),
    {
      name: "headroom_series_exported",
      type: "gauge",
      help: "Series (provider, model, app) in this scrape.",
      samples: [{ labels: {}, value: kept.length }],
    },
    {
      name: "headroom_series_dropped",
      type: "gauge",
      help: "Fresh series left out of this scrape by the per-project cap (READ_METRICS_MAX_SERIES).",
      samples: [{ labels: {}, value: dropped }],
    },
  );
  return families;
}
