import type { MetricView, Status } from "./api.js";
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
import { appsWords, type Grouping, noun, type Unit, unitName } from "./now-units.js";

// "Now" as one compact table: a row per pool (its member apps named) or, by app, per series,
// showing its worst window, worst first; its other windows, its bars and a pool's members on
// demand, in a detail row under it. Filtered by provider, model, app (a pool with that member)
// and status. On a phone the row keeps its status, name, window, use and what is left; the rest
// is in the detail.

/** A row: a pool, with its member apps, or one app's series. */
export interface Row {
  key: string;
  provider: string;
  model: string | null;
  apps: string[];
  status: Status;
  /** The figures, worst first: the row shows the first. */
  figures: Figure[];
  unit: Unit;
}

export function rowsOf(units: Unit[], now: number): Row[] {
  return units
    .map((u) => ({
      key: u.key,
      provider: u.provider,
      model: u.model,
      apps: u.apps,
      status: u.status,
      figures: figuresOf(u, now),
      unit: u,
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

export const matches = (r: Pick<Row, "provider" | "model" | "apps" | "status">, f: Filters) =>
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

const cut = (text: string) => h("span", { class: "cut", title: text }, text);

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
      "aria-label": `Details of ${unitName(r.unit)}`,
    },
    // One word whatever the state (aria-expanded says it): the name a voice command uses.
    "Details",
  );
  toggle.addEventListener("click", () => onToggle(r.key));
  const cells = [
    h("td", { "data-field": "status" }, badge(r.status)),
    // Names can be long (a model up to 256 characters, a pool's many apps): cut to the column,
    // each whole in its title.
    h("td", { class: "wide", "data-field": "provider" }, cut(r.provider)),
    h("td", { class: "wide", "data-field": "model" }, cut(r.model ?? "(model not seen)")),
    h("td", { class: "wide", "data-field": "app" }, cut(appsWords(r.unit))),
    // On a phone, one cell names the series or pool.
    h("th", { scope: "row", class: "narrow", "data-field": "series" }, cut(unitName(r.unit))),
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
      "data-pool": r.unit.isPool ? (r.unit.pool?.id ?? "") : null,
      "data-members": r.apps.length,
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
      h("td", { colspan: COLUMNS }, seriesPart(r.unit, now)),
    ),
  ];
}

/** Fills the table with the rows that match, worst first; `open` holds the expanded rows' keys. */
export function renderTable(
  table: HTMLTableElement,
  count: HTMLElement,
  units: Unit[],
  grouping: Grouping,
  filters: Filters,
  open: Set<string>,
  onToggle: (key: string) => void,
) {
  const now = Date.now();
  const all = rowsOf(units, now);
  const shown = all.filter((r) => matches(r, filters));
  fillTable(
    table,
    shown.flatMap((r) => row(r, open.has(r.key), now, onToggle)),
    all.length === 0
      ? "No reports yet: send one to the edge and it shows here."
      : `No ${noun(grouping, 2)} match these filters.`,
  );
  const what = noun(grouping, all.length);
  count.textContent =
    shown.length === all.length
      ? `${all.length} ${what}, worst first`
      : `${shown.length} of ${all.length} ${what} (${filtersText(filters)}), worst first`;
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
