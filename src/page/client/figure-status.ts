import type { Figures, MetricView, Status, UnknownReason, WindowView } from "./api.js";
import { duration, utc } from "./format.js";

// Each figure's own status, and what the page says about a window in words. No DOM.
//
// /api/v1/headroom gives a status per series: its worst window's, by the thresholds of the alert
// rules watching it (else 70 % and 90 %, src/headroom/headroom-view.ts). A window's own status is
// read here with those default thresholds, then kept consistent with the series' answer: no
// window is worse than its series (a rule with higher thresholds watches it), and when the series
// is worse than any window reads, its most used window takes the series' status (a rule with
// lower thresholds). A window that has reset since its last report has no status but "reset".

/** The alert rules' default thresholds (headroom-view.ts' DEFAULT_THRESHOLDS). */
export const THRESHOLDS = { warnPct: 70, criticalPct: 90 } as const;

/** Worst first. A status this page does not know yet sorts with "reset": worth a look, not alarm. */
const RANK: Record<string, number> = { critical: 0, warning: 1, reset: 2, ok: 3, stale: 4 };
export const rank = (s: Status) => RANK[s] ?? 2;

/** A figure's status: that of a used %, or "none" when it has no used %. */
export type FigureStatus = "ok" | "warning" | "critical" | "reset" | "stale" | "none";

export const isReset = (m: Pick<MetricView, "reset_since_report" | "resets_at">, now: number) =>
  m.reset_since_report === true || (m.resets_at !== null && Date.parse(m.resets_at) <= now);

export function levelOf(usedPct: number): "ok" | "warning" | "critical" {
  if (usedPct >= THRESHOLDS.criticalPct) return "critical";
  if (usedPct >= THRESHOLDS.warnPct) return "warning";
  return "ok";
}

const LEVEL = { ok: 0, warning: 1, critical: 2 } as const;

/** One of a series' figures (a window, or a contract metric for a series without windows). */
export interface Figure {
  view: MetricView;
  /** requests, tokens, credits, input_tokens, or a provider's own dimension. */
  dimension: string;
  /** The stated length ("1m", "1d"), null when not stated, undefined for a contract metric. */
  window: string | null | undefined;
  status: FigureStatus;
  /** A window's `source` and `learned_from`; undefined for a contract metric. */
  source?: WindowView["source"];
  learnedFrom?: WindowView["learned_from"];
}

/** What a series is watched through: its windows, else (a copy kept before windows) its metrics. */
function watched(s: Figures): Omit<Figure, "status">[] {
  const windows = (s.windows ?? []).filter((w) => w.limit !== null || w.remaining !== null);
  if (windows.length > 0)
    return windows.map((w) => ({
      view: w,
      dimension: w.dimension,
      window: w.window,
      source: w.source,
      learnedFrom: w.learned_from,
    }));
  return (["requests", "tokens", "credits"] as const)
    .filter((m) => s[m].limit !== null || s[m].remaining !== null)
    .map((m) => ({ view: s[m], dimension: m, window: undefined }));
}

/** A figure's status by the default thresholds, capped by its series' status (see the top). */
export function ownStatus(view: MetricView, series: Status, now: number): FigureStatus {
  if (series === "stale") return "stale";
  if (isReset(view, now)) return "reset";
  if (view.used_pct === null) return "none";
  const level = levelOf(view.used_pct);
  const cap =
    series === "critical" ? 2 : series === "warning" ? 1 : series === "ok" ? 0 : LEVEL[level];
  return (["ok", "warning", "critical"] as const)[Math.min(LEVEL[level], cap)] ?? "ok";
}

/** The series' figures with their own statuses, the worst first. */
export function figuresOf(s: Figures, now: number): Figure[] {
  const list: Figure[] = watched(s).map((f) => ({
    ...f,
    status: ownStatus(f.view, s.status, now),
  }));
  // The series is worse than any figure reads: a rule with lower thresholds watches its most used.
  if (s.status === "critical" || s.status === "warning") {
    const target: "critical" | "warning" = s.status === "critical" ? "critical" : "warning";
    const level = LEVEL[target];
    const counted = list.filter((f) => f.status !== "reset" && f.view.used_pct !== null);
    if (!counted.some((f) => f.status === target)) {
      const most = counted.reduce<Figure | null>(
        (a, f) => (a === null || (f.view.used_pct ?? 0) > (a.view.used_pct ?? 0) ? f : a),
        null,
      );
      if (most && LEVEL[most.status as keyof typeof LEVEL] < level) most.status = target;
    }
  }
  return list.sort(worstFirst);
}

const FIGURE_RANK: Record<FigureStatus, number> = {
  critical: 0,
  warning: 1,
  ok: 2,
  none: 3,
  reset: 4,
  stale: 5,
};

export const worstFirst = (a: Figure, b: Figure) =>
  FIGURE_RANK[a.status] - FIGURE_RANK[b.status] ||
  (b.view.used_pct ?? -1) - (a.view.used_pct ?? -1) ||
  a.dimension.localeCompare(b.dimension);

/** The status of one of the contract's metrics (a bar): the window it is, else its own. */
export function metricStatus(
  s: Figures,
  metric: "requests" | "tokens" | "credits",
  figures: Figure[],
  now: number,
): FigureStatus {
  const m = s[metric];
  const same = figures.find(
    (f) =>
      f.dimension === metric &&
      f.view.limit === m.limit &&
      f.view.remaining === m.remaining &&
      f.view.resets_at === m.resets_at,
  );
  return same ? same.status : ownStatus(m, s.status, now);
}

const DIMENSION_WORDS: Record<string, string> = {
  requests: "Requests",
  tokens: "Tokens",
  input_tokens: "Input tokens",
  output_tokens: "Output tokens",
  credits: "Credits",
};
export const dimensionWord = (d: string) =>
  DIMENSION_WORDS[d] ?? `${d.charAt(0).toUpperCase()}${d.slice(1).replace(/_/g, " ")}`;

const LENGTH_S: Record<string, number> = {
  "1s": 1,
  "10s": 10,
  "1m": 60,
  "1h": 3_600,
  "5h": 5 * 3_600,
  "1d": 86_400,
  "7d": 7 * 86_400,
  "1mo": 31 * 86_400,
};
const LENGTH_WORDS: Record<string, string> = {
  "1s": "per second",
  "10s": "per 10 s",
  "1m": "per minute",
  "1h": "per hour",
  "5h": "per 5 hours",
  "1d": "per day",
  "7d": "per 7 days",
  "1mo": "per month",
};

/**
 * The window's length in words; "length unknown" when none is stated, or when the reset is
 * further off than the stated length allows (a per-minute window that resets in 7 min is not
 * one: the length was guessed wrong somewhere, and the reset is the provider's own figure).
 */
export function lengthWord(
  window: string | null | undefined,
  resetsAt: string | null,
  now: number,
) {
  if (window === undefined) return "";
  if (window === null) return "length not stated";
  const seconds = LENGTH_S[window];
  if (seconds !== undefined && resetsAt !== null) {
    // A second's slack: the reset is rounded to whole seconds by some providers.
    if ((Date.parse(resetsAt) - now) / 1000 > seconds + 1) return "length unknown";
  }
  return LENGTH_WORDS[window] ?? `per ${window}`;
}

/** "Requests per day", "Input tokens per minute", "Tokens" (a contract metric). */
export const windowName = (
  f: { dimension: string; window: string | null | undefined; view: { resets_at: string | null } },
  now: number,
) =>
  [dimensionWord(f.dimension), lengthWord(f.window, f.view.resets_at, now)]
    .filter(Boolean)
    .join(" ");

/**
 * Where a window's figures come from, in words, when not from the provider's own statement
 * (docs/providers.md): null for `stated` (and a contract metric). A source a newer API adds is
 * named as it is.
 */
export function sourceTitle(f: Pick<Figure, "source" | "learnedFrom">): string | null {
  const learned = f.learnedFrom
    ? `limit learned from the provider's 429 at ${utc(f.learnedFrom.at)} UTC`
    : null;
  switch (f.source) {
    case undefined:
    case "stated":
      return null;
    case "counted":
      return ["counted from the reports Headroom received: a floor of what was used", learned]
        .filter(Boolean)
        .join("; ");
    case "declared":
      return "limit declared for this project";
    case "learned":
      return learned ?? "limit learned from the provider's 429";
    default:
      return `figures ${f.source}`;
  }
}

/** "resets in 7 min 38 s", or once past: "reset at 03:52:22 — no report since". */
export function resetText(iso: string, now = Date.now()) {
  const s = (Date.parse(iso) - now) / 1000;
  return s > 0 ? `resets in ${duration(s)}` : `reset at ${utc(iso).slice(11)} — no report since`;
}

/** Why a burn rate is null, in words: the API's reason. */
export function burnUnknown(m: MetricView, now: number): string {
  if (isReset(m, now)) return "burn unknown: the window has reset since its last report";
  switch (m.burn_unknown as UnknownReason | null | undefined) {
    case "no_figures":
      return "burn unknown: no remaining figure reported";
    case "too_few_reports":
    case null:
    case undefined:
      // Two reports a second or more apart, in this window (a reset starts a window's count again).
      return "burn unknown: too few reports since the window began";
    default:
      return `burn unknown: ${String(m.burn_unknown).replace(/_/g, " ")}`;
  }
}

/**
 * The time to exhaustion in words, by the API's figure or its reason. "Not exhausted before the
 * reset" only when the API says so (resets_first) and the reset is still ahead.
 */
export function exhaustionText(m: MetricView, now: number, hasReset = true): string {
  if (isReset(m, now) && hasReset) return "window reset: no report since";
  if (m.exhaustion_eta_s !== null && m.exhaustion_eta_s !== undefined) {
    return m.exhaustion_eta_s <= 0 ? "exhausted" : `exhausted in ${duration(m.exhaustion_eta_s)}`;
  }
  if (m.remaining === null) return "time to exhaustion unknown: no remaining figure reported";
  if (m.remaining <= 0) return "exhausted";
  switch (m.exhaustion_unknown) {
    case "not_burning":
      return "not being used up";
    case "resets_first":
      return hasReset && m.resets_at !== null
        ? "not exhausted before the reset"
        : "time to exhaustion unknown";
    case "no_reset_time":
      return "time to exhaustion unknown: no reset time reported";
    default:
      break;
  }
  if (m.burn_per_s === null)
    return "time to exhaustion unknown: too few reports since the window began";
  if (!(m.burn_per_s > 0)) return "not being used up";
  const resets = m.resets_at === null ? Number.NaN : Date.parse(m.resets_at);
  if (!hasReset || Number.isNaN(resets))
    return "time to exhaustion unknown: no reset time reported";
  return m.remaining / m.burn_per_s > (resets - now) / 1000
    ? "not exhausted before the reset"
    : "time to exhaustion unknown";
}
