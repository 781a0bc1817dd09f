import type { MetricView, SeriesView, Status } from "./api.js";
import { fillTable, h } from "./dom.js";
import {
  dimensionWord,
  type Figure,
  figuresOf,
  isReset,
  rank,
  windowName,
  worstFirst,
} from "./figure-status.js";
import { duration, pct, rate } from "./format.js";
import { badge, leftOf, resetSpan, seriesPart, word } from "./now-cards.js";

// "Now" as one compact table: a row per series (a pool, once /headroom groups series in pools:
// a row stands for whatever the answer lists, with its apps) showing its worst window, worst
// first; the series' other windows and its bars on demand, in a detail row under it. Filtered by
// provider, model, app and status. On a phone the row keeps its status, name, window, use and
// what is left; the rest is in the detail.

/** A row: a series today; a pool, with its member apps, when the answer gives pools. */
export interface Row {
  key: string;
  provider: string;
  model: string | null;
  apps: string[];
  status: Status;
  /** The figures, worst first: the row shows the first. */
  figures: Figure[];
  series: SeriesView;
}

export function rowsOf(series: SeriesView[], now: number): Row[] {
  return series
    .map((s) => ({
      key: JSON.stringify([s.provider, s.model, s.app]),
      provider: s.provider,
      model: s.model,
      apps: [s.app],
      status: s.status,
      figures: figuresOf(s, now),
      series: s,
    }))
    .sort(
      (a, b) =>
        rank(a.status) - rank(b.status) ||
        (a.figures[0] && b.figures[0] ? worstFirst(a.figures[0], b.figures[0]) : 0) ||
        a.provider.localeCompare(b.provider) ||
        (a.model ?? "").localeCompare(b.model ?? "") ||
        a.key.localeCompare(b.key),
    );
}

export interface Filters {
  provider: string;
  model: string;
  app: string;
  status: string;
}

export const matches = (r: Row, f: Filters) =>
  (!f.provider || r.provider === f.provider) &&
  (!f.model || (r.model ?? "") === f.model) &&
  (!f.app || r.apps.includes(f.app)) &&
  (!f.status || r.status === f.status);

const COLUMNS = 12;

// The table's cells say in a word or two what the detail says in full (figure-status.ts).
const SHORT: Record<string, string> = {
  no_figures: "no figures",
  no_reset_time: "unknown",
  too_few_reports: "too few reports",
  not_burning: "not used up",
  resets_first: "not before the reset",
  reset_since_report: "reset",
};
const shortUnknown = (v: MetricView, why: string | null, now: number) =>
  isReset(v, now) ? "reset" : ((why ? SHORT[why] : undefined) ?? "unknown");

function shortExhaustion(v: MetricView, hasReset: boolean, now: number): string {
  if (hasReset && isReset(v, now)) return "reset";
  if (v.exhaustion_eta_s !== null && v.exhaustion_eta_s !== undefined)
    return v.exhaustion_eta_s <= 0 ? "exhausted" : `in ${duration(v.exhaustion_eta_s)}`;
  if (v.remaining !== null && v.remaining <= 0) return "exhausted";
  return shortUnknown(v, v.exhaustion_unknown, now);
}

/** The window's name; its length only when stated (the detail says "length not stated"). */
const shortName = (f: Figure, now: number) =>
  f.window === null ? dimensionWord(f.dimension) : windowName(f, now);
const UNITS: Record<string, string> = { credits: "credits" };
const unitOf = (dimension: string) =>
  UNITS[dimension] ?? (dimension.endsWith("tokens") ? "tokens" : dimension.replace(/_/g, " "));

function row(r: Row, open: boolean, now: number, onToggle: (key: string) => void) {
  const f = r.figures[0];
  const v = f?.view;
  const reset = v ? isReset(v, now) : false;
  const more = r.figures.length - 1;
  const detailId = `detail-${encodeURIComponent(r.key).replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  const toggle = h(
    "button",
    {
      type: "button",
      class: "toggle",
      "aria-expanded": open ? "true" : "false",
      "aria-controls": open ? detailId : null,
      "aria-label": `Details of ${r.provider} ${r.model ?? "(model not seen)"} ${r.apps.join(", ")}`,
    },
    // One word whatever the state (aria-expanded says it): the name a voice command uses.
    "Details",
  );
  toggle.addEventListener("click", () => onToggle(r.key));
  const cells = [
    h("td", { "data-field": "status" }, badge(r.status)),
    h("td", { class: "wide", "data-field": "provider" }, r.provider),
    h("td", { class: "wide", "data-field": "model" }, r.model ?? "(model not seen)"),
    h("td", { class: "wide", "data-field": "app" }, r.apps.join(", ")),
    // On a phone, one cell names the series.
    h(
      "th",
      { scope: "row", class: "narrow", "data-field": "series" },
      `${r.provider} · ${r.model ?? "(model not seen)"} · ${r.apps.join(", ")}`,
    ),
    h(
      "td",
      { "data-field": "window" },
      f ? shortName(f, now) : "no figures (provider hints only)",
      more > 0 ? h("span", { class: "muted" }, ` +${more}`) : null,
    ),
    h(
      "td",
      { class: `num fig status-${f?.status ?? "none"}`, "data-field": "used_pct" },
      !v ? "—" : reset ? "reset" : v.used_pct === null ? "—" : pct(v.used_pct),
    ),
    h("td", { class: "num", "data-field": "left" }, !v || reset ? "—" : leftOf(v, f.dimension)),
    h(
      "td",
      { class: "wide", "data-field": "resets_at" },
      !v ? "—" : v.resets_at === null ? "no reset time" : resetSpan(v.resets_at),
    ),
    h(
      "td",
      { class: "wide num", "data-field": "burn" },
      !v
        ? "—"
        : v.burn_per_s === null
          ? shortUnknown(v, v.burn_unknown, now)
          : rate(v.burn_per_s, unitOf(f.dimension)),
    ),
    h(
      "td",
      { class: "wide", "data-field": "exhaustion" },
      !v ? "—" : shortExhaustion(v, f.dimension !== "credits", now),
    ),
    h("td", {}, toggle),
  ];
  const main = h(
    "tr",
    {
      class: `status-${r.status}`,
      "data-key": r.key,
      "data-provider": r.provider,
      "data-model": r.model ?? "",
      "data-app": r.apps.join(","),
      "data-status": r.status,
      "data-figure-status": f?.status ?? "none",
    },
    cells,
  );
  if (!open) return [main];
  return [
    main,
    h(
      "tr",
      { class: "detail", id: detailId, "data-detail": r.key },
      h("td", { colspan: COLUMNS }, seriesPart(r.series, now)),
    ),
  ];
}

/** Fills the table with the rows that match, worst first; `open` holds the expanded rows' keys. */
export function renderTable(
  table: HTMLTableElement,
  count: HTMLElement,
  series: SeriesView[],
  filters: Filters,
  open: Set<string>,
  onToggle: (key: string) => void,
) {
  const now = Date.now();
  const all = rowsOf(series, now);
  const shown = all.filter((r) => matches(r, filters));
  fillTable(
    table,
    shown.flatMap((r) => row(r, open.has(r.key), now, onToggle)),
    all.length === 0
      ? "No reports yet: send one to the edge and it shows here."
      : "No series match these filters.",
  );
  count.textContent =
    shown.length === all.length
      ? `${all.length} series, worst first`
      : `${shown.length} of ${all.length} series (${filtersText(filters)}), worst first`;
}

const filtersText = (f: Filters) =>
  [
    f.provider && `provider ${f.provider}`,
    f.model && `model ${f.model}`,
    f.app && `app ${f.app}`,
    f.status && `status ${word(f.status)}`,
  ]
    .filter(Boolean)
    .join(", ");
