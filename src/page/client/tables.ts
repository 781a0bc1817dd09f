import type { AlertEvent, Report, Spend, Usage } from "./api.js";
import { fillTable, h } from "./dom.js";
import { amount, CREDITS, count, dash, duration, figure, pct, utc } from "./format.js";
import { eventWindow } from "./over-time.js";

// The page's tables: per model over the range (from the same usage answer as the chart), the
// report log, the alert events and the spend per provider.

const num = (text: string, value?: number | null) =>
  h(
    "td",
    { class: "num", "data-value": value === undefined || value === null ? null : String(value) },
    text,
  );

interface ModelRow {
  provider: string;
  model: string | null;
  reports: number;
  cost: number;
  lowestLeftPct: number | null;
  requestsMin: number | null;
  tokensMin: number | null;
  /** The most used dimension over the range (from the windows), and its % used. */
  worst: { dimension: string; used: number } | null;
}

const minOf = (a: number | null, b: number | null) =>
  a === null ? b : b === null ? a : Math.min(a, b);

export function modelRows(usage: Usage): ModelRow[] {
  const rows = new Map<string, ModelRow>();
  for (const p of usage.points) {
    const key = JSON.stringify([p.provider, p.model]);
    const row = rows.get(key) ?? {
      provider: p.provider ?? "",
      model: p.model ?? null,
      reports: 0,
      cost: 0,
      lowestLeftPct: null,
      requestsMin: null,
      tokensMin: null,
      worst: null,
    };
    row.reports += p.reports;
    row.cost += p.cost;
    row.requestsMin = minOf(row.requestsMin, p.requests_remaining_min);
    row.tokensMin = minOf(row.tokensMin, p.tokens_remaining_min);
    row.lowestLeftPct = minOf(
      row.lowestLeftPct,
      p.used_pct_max === null ? null : 100 - p.used_pct_max,
    );
    for (const [dimension, used] of Object.entries(p.used_pct_by_dimension ?? {}))
      if (row.worst === null || used > row.worst.used) row.worst = { dimension, used };
    rows.set(key, row);
  }
  return [...rows.values()].sort(
    (a, b) => (a.lowestLeftPct ?? 101) - (b.lowestLeftPct ?? 101) || b.reports - a.reports,
  );
}

/** What the lowest headroom was of: the contract's figures, or the most used window's dimension. */
const detail = (r: ModelRow) =>
  r.requestsMin === null && r.tokensMin === null
    ? (r.worst?.dimension ?? "windows")
    : `requests ${count(r.requestsMin)}, tokens ${count(r.tokensMin)}`;

export function renderModels(table: HTMLTableElement, usage: Usage) {
  const rows = modelRows(usage).map((r) =>
    h(
      "tr",
      { "data-provider": r.provider, "data-model": r.model ?? "" },
      h("td", {}, r.provider),
      h("td", {}, r.model ?? "(model not seen)"),
      num(count(r.reports), r.reports),
      h(
        "td",
        { class: "num", "data-value": r.lowestLeftPct === null ? null : String(r.lowestLeftPct) },
        r.lowestLeftPct === null ? dash : `${pct(r.lowestLeftPct)} left (${detail(r)})`,
      ),
      num(amount(r.cost), r.cost),
    ),
  );
  fillTable(table, rows, "No reports in this range.");
}

/** "output_tokens 1m: 190 of 16,000 left (98.8% used)", or "requests: 79 left" without a limit. */
function windowText(w: Report["windows"][number]): string {
  const name = w.window === null ? w.dimension : `${w.dimension} ${w.window}`;
  if (w.limit === null) return `${name}: ${count(w.remaining)} left`;
  const used = w.used_pct === null ? "" : ` (${pct(w.used_pct)} used)`;
  return `${name}: ${count(w.remaining)} of ${count(w.limit)} left${used}`;
}

/** A report's windows, most used first, and its error: what the provider said, whichever way. */
function saidCell(r: Report) {
  const windows = [...r.windows].sort((a, b) => (b.used_pct ?? -1) - (a.used_pct ?? -1));
  if (windows.length === 0 && r.error === null) return h("td", { "data-field": "windows" }, dash);
  return h(
    "td",
    { "data-field": "windows", class: "said" },
    r.error === null
      ? null
      : h(
          "div",
          {
            "data-field": "error",
            class: r.error.rate_limited ? "level-critical" : "level-warning",
          },
          r.error.summary,
        ),
    windows.map((w) =>
      h(
        "div",
        {
          "data-dimension": w.dimension,
          "data-window": w.window ?? "",
          "data-value": w.used_pct === null ? null : String(w.used_pct),
        },
        windowText(w),
      ),
    ),
  );
}

export function renderLog(table: HTMLTableElement, items: Report[]) {
  const rows = items.map((r) =>
    h(
      "tr",
      { "data-id": r.id, "data-provider": r.provider, "data-app": r.app },
      h("td", {}, utc(r.timestamp)),
      h("td", {}, r.app),
      h("td", {}, r.provider),
      h("td", {}, r.model ?? "(model not seen)"),
      saidCell(r),
      num(amount(r.credits?.request_cost ?? null), r.credits?.request_cost ?? null),
    ),
  );
  fillTable(table, rows, "No reports match.");
}

export function renderAlerts(table: HTMLTableElement, items: AlertEvent[]) {
  const rows = items.map((e) =>
    h(
      "tr",
      { "data-id": e.id, "data-level": e.level },
      h("td", {}, utc(e.at)),
      h("td", {}, h("span", { class: `level-${e.level}` }, e.level)),
      h("td", {}, e.provider),
      h("td", {}, e.model ?? "(any model)"),
      h("td", {}, e.app),
      h("td", { "data-field": "window" }, eventWindow(e)),
      num(pct(e.used_pct), e.used_pct),
    ),
  );
  fillTable(table, rows, "No alert events in this range.");
}

/** Why the burn now or the depletion is unknown, in words (the model of now's reasons). */
const REASONS: Record<string, string> = {
  no_figures: "unknown: no balance reported",
  too_few_reports: "unknown: too few recent credit reports",
  not_burning: "not being used up",
  no_reset_time: "unknown",
  resets_first: "not before the reset",
  reset_since_report: "unknown: reset since its last report",
};
const reason = (why: string | null | undefined, fallback: string) =>
  (why ? REASONS[why] : undefined) ?? fallback;

export function renderSpend(table: HTMLTableElement, spend: Spend) {
  // The burn is the credits' burn now, the figure the cards and the exporter give (the model of
  // now), never the range's cost spread over its idle hours.
  const rows = spend.providers.map((p) =>
    h(
      "tr",
      { "data-provider": p.provider },
      h("td", {}, p.provider),
      num(amount(p.cost), p.cost),
      num(count(p.requests), p.requests),
      num(
        p.credits_burn_per_hour === null || p.credits_burn_per_hour === undefined
          ? reason(p.credits_burn_unknown, "unknown")
          : `${figure(p.credits_burn_per_hour)} ${CREDITS}/h`,
        p.credits_burn_per_hour,
      ),
      num(amount(p.credits_remaining), p.credits_remaining),
      num(
        p.hours_until_depleted === null
          ? p.credits_remaining === null
            ? "unknown: no balance reported"
            : reason(p.hours_until_depleted_unknown, "not being used up")
          : duration(p.hours_until_depleted * 3600),
        p.hours_until_depleted,
      ),
    ),
  );
  fillTable(table, rows, "No spend in this range.");
}
