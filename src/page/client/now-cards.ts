import type { MetricView, SeriesView, Status, WindowView } from "./api.js";
import { h } from "./dom.js";
import { amount, count, duration, pct, rate, utc } from "./format.js";

// "Now": a summary line, then a card per provider and, inside it, a part per model and app, with
// requests, tokens and credits left as bars coloured by status, the status in words, the reset
// countdown, the burn rate, the time to exhaustion and the age of the figures; under them, each
// window the provider states (dimension, length, % used, reset), worst first. Worst first, so
// a critical series is the first thing seen. Countdowns and ages tick every second (tickClocks).

/** Worst first. A status this page does not know yet sorts with "reset": worth a look, not alarm. */
const RANK: Record<string, number> = { critical: 0, warning: 1, reset: 2, ok: 3, stale: 4 };
const rank = (s: Status) => RANK[s] ?? 2;
const WORDS: Record<string, string> = {
  ok: "OK",
  warning: "Warning",
  critical: "Critical",
  reset: "Reset",
  stale: "Stale",
};
const word = (s: Status) => WORDS[s] ?? `${s.charAt(0).toUpperCase()}${s.slice(1)}`;
const UNITS = { requests: "requests", tokens: "tokens", credits: "credits" } as const;
const METRICS = ["requests", "tokens", "credits"] as const;
/** Why a burn rate is null: it takes two reports a second or more apart within a few minutes. */
const NO_BURN = "one recent report so far";

function badge(status: Status) {
  return h("span", { class: `badge status-${status}`, "data-status": status }, word(status));
}

/** "1 critical, 2 warnings, 9 ok": how many series are in each status, worst first. */
export function summary(series: SeriesView[]): string {
  const counts = new Map<Status, number>();
  for (const s of series) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([status, n]) => `${n} ${status === "warning" && n !== 1 ? "warnings" : status}`)
    .join(", ");
}

/**
 * The time to exhaustion in words. "Not exhausted before the reset" only when the figures show
 * it: a burn, a reset time still ahead, and remaining / burn beyond it.
 */
function exhaustion(m: MetricView, hasReset: boolean, now: number): string {
  if (m.exhaustion_eta_s !== null) {
    return m.exhaustion_eta_s <= 0 ? "exhausted" : `exhausted in ${duration(m.exhaustion_eta_s)}`;
  }
  if (m.remaining === null) return "time to exhaustion unknown: no remaining figure reported";
  if (m.remaining <= 0) return "exhausted";
  if (m.burn_per_s === null) return `time to exhaustion unknown: ${NO_BURN}`;
  if (!(m.burn_per_s > 0)) return "not being used up";
  const resets = m.resets_at === null ? Number.NaN : Date.parse(m.resets_at);
  if (!hasReset || Number.isNaN(resets))
    return "time to exhaustion unknown: no reset time reported";
  if (resets <= now) return "time to exhaustion unknown: the window has reset since";
  return m.remaining / m.burn_per_s > (resets - now) / 1000
    ? "not exhausted before the reset"
    : "time to exhaustion unknown";
}

const shown = (m: MetricView) => m.limit !== null || m.remaining !== null;

function metric(
  series: SeriesView,
  name: (typeof METRICS)[number],
  label: string,
  sayBurn: boolean,
) {
  const m = series[name];
  if (!shown(m)) return null;
  const fmt = name === "credits" ? amount : count;
  const leftPct = m.used_pct === null ? null : Math.max(0, 100 - m.used_pct);
  // The bars of a series take its status, which the API works out from the project's rules.
  const status = series.status;
  const fill = h("div");
  fill.style.width = `${leftPct ?? 0}%`;
  const value = (field: string, n: number | null, text: string) =>
    h("span", { "data-field": field, "data-value": n === null ? "" : String(n) }, text);
  // Credits have no window: a balance, not a limit that resets.
  const hasReset = name !== "credits";
  return h(
    "div",
    { class: "metric", "data-metric": name },
    h(
      "div",
      { class: "line" },
      h("strong", {}, label),
      h(
        "span",
        {},
        value("remaining", m.remaining, fmt(m.remaining)),
        " left of ",
        value("limit", m.limit, m.limit === null ? "an unreported limit" : fmt(m.limit)),
        m.used_pct === null
          ? null
          : [" (", value("used_pct", m.used_pct, pct(m.used_pct)), " used)"],
      ),
    ),
    h(
      "div",
      {
        class: `bar status-${status}`,
        role: "meter",
        "aria-label": `${label} left`,
        "aria-valuemin": 0,
        "aria-valuemax": 100,
        "aria-valuenow": leftPct === null ? null : Math.round(leftPct),
        "aria-valuetext": leftPct === null ? "unknown" : `${Math.round(leftPct)}% left`,
      },
      fill,
    ),
    h(
      "div",
      { class: "details" },
      hasReset
        ? m.resets_at
          ? h("span", { "data-until": m.resets_at }, resetText(m.resets_at))
          : h("span", { "data-field": "resets_at" }, "no reset time reported")
        : null,
      hasReset && sayBurn ? " · " : null,
      sayBurn
        ? [
            h(
              "span",
              {
                "data-field": "burn_per_s",
                "data-value": m.burn_per_s === null ? "" : m.burn_per_s,
              },
              m.burn_per_s === null
                ? "burn rate unknown"
                : `burn ${rate(m.burn_per_s, UNITS[name])}`,
            ),
            " · ",
            h("span", { "data-field": "exhaustion_eta_s" }, exhaustion(m, hasReset, Date.now())),
          ]
        : null,
    ),
  );
}

const DIMENSION_WORDS: Record<string, string> = {
  requests: "Requests",
  tokens: "Tokens",
  input_tokens: "Input tokens",
  output_tokens: "Output tokens",
  credits: "Credits",
};
const dimensionWord = (d: string) => DIMENSION_WORDS[d] ?? d.replace(/_/g, " ");
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
const lengthWord = (w: string | null) =>
  w === null ? "window not stated" : (LENGTH_WORDS[w] ?? `per ${w}`);

/** The series' windows: one row each, the most used first. */
function windowsPart(s: SeriesView) {
  const list = (s.windows ?? []).filter(shown);
  if (list.length === 0) return null;
  const used = (w: WindowView) => (w.reset_since_report ? -1 : (w.used_pct ?? -1));
  const rows = [...list]
    .sort((a, b) => used(b) - used(a))
    .map((w) =>
      h(
        "tr",
        {
          "data-dimension": w.dimension,
          "data-window": w.window ?? "",
          "data-used": w.used_pct === null ? "" : String(w.used_pct),
        },
        h("th", { scope: "row" }, dimensionWord(w.dimension)),
        h("td", { "data-field": "window" }, lengthWord(w.window)),
        h(
          "td",
          { "data-field": "used_pct" },
          w.used_pct === null ? "–" : `${pct(w.used_pct)} used`,
        ),
        h(
          "td",
          { "data-field": "resets_at" },
          w.resets_at === null
            ? "no reset time"
            : h("span", { "data-until": w.resets_at }, resetText(w.resets_at)),
        ),
      ),
    );
  return h(
    "table",
    { class: "windows", "data-field": "windows" },
    h("caption", {}, "Windows"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Dimension"),
        h("th", { scope: "col" }, "Window"),
        h("th", { scope: "col" }, "Used"),
        h("th", { scope: "col" }, "Resets"),
      ),
    ),
    h("tbody", {}, rows),
  );
}

function seriesPart(s: SeriesView) {
  // A report with only the provider's headers (or error body) has figures in its windows alone.
  const newestWindow = (s.windows ?? []).reduce<string | null>(
    (at, w) => (at === null || w.reported_at > at ? w.reported_at : at),
    null,
  );
  const reported = s.reported_at ?? s.credits_reported_at ?? newestWindow;
  // Said once for the series, not under every bar, when no figure of it has a burn yet.
  const metrics = METRICS.map((name) => s[name]).filter(shown);
  const noBurn =
    metrics.length > 0 &&
    metrics.every((m) => m.burn_per_s === null && m.exhaustion_eta_s === null);
  return h(
    "div",
    {
      class: "series",
      "data-provider": s.provider,
      "data-model": s.model ?? "",
      "data-app": s.app,
      "data-status": s.status,
    },
    h(
      "h4",
      {},
      s.model ?? "(model not seen)",
      h("span", { class: "muted" }, ` · app ${s.app}`),
      badge(s.status),
    ),
    metric(s, "requests", "Requests", !noBurn),
    metric(s, "tokens", "Tokens", !noBurn),
    metric(s, "credits", "Credits", !noBurn),
    windowsPart(s),
    noBurn
      ? h(
          "p",
          { class: "details", "data-field": "burn" },
          `Burn rate and time to exhaustion unknown: ${NO_BURN}.`,
        )
      : null,
    h(
      "p",
      { class: "details" },
      reported
        ? [
            "figures ",
            h("span", { "data-since": reported }, duration(secondsSince(reported))),
            " old",
          ]
        : "no figures yet (provider hints only)",
      " · last seen ",
      h("span", { "data-since": s.last_seen }, duration(secondsSince(s.last_seen))),
      " ago",
    ),
  );
}

const byRank = (a: SeriesView, b: SeriesView) =>
  rank(a.status) - rank(b.status) ||
  (a.model ?? "").localeCompare(b.model ?? "") ||
  a.app.localeCompare(b.app);

export function renderCards(
  container: HTMLElement,
  summaryLine: HTMLElement,
  series: SeriesView[],
) {
  const byProvider = new Map<string, SeriesView[]>();
  for (const s of series) byProvider.set(s.provider, [...(byProvider.get(s.provider) ?? []), s]);
  const cards = [...byProvider]
    .map(([provider, list]) => ({ provider, list: list.sort(byRank) }))
    // Each list is sorted, so its first series is its worst.
    .sort(
      (a, b) =>
        rank(a.list[0]?.status ?? "ok") - rank(b.list[0]?.status ?? "ok") ||
        a.provider.localeCompare(b.provider),
    )
    .map(({ provider, list }) => {
      const worst = list[0]?.status ?? "ok";
      return h(
        "article",
        {
          class: `card status-${worst}`,
          "data-provider": provider,
          "data-status": worst,
          "aria-labelledby": `card-${provider}`,
        },
        h("h3", { id: `card-${provider}` }, provider, badge(worst)),
        list.map(seriesPart),
      );
    });
  summaryLine.textContent = summary(series);
  container.replaceChildren(
    ...(cards.length > 0
      ? cards
      : [h("p", { class: "empty" }, "No reports yet: send one to the edge and it shows here.")]),
  );
}

function resetText(iso: string) {
  const s = secondsUntil(iso);
  return s > 0 ? `resets in ${duration(s)}` : `window reset at ${utc(iso).slice(11)} UTC`;
}

const secondsUntil = (iso: string) => (Date.parse(iso) - Date.now()) / 1000;
const secondsSince = (iso: string) => (Date.now() - Date.parse(iso)) / 1000;

/** Brings every countdown and age on the page to the current second. */
export function tickClocks(root: ParentNode) {
  for (const el of root.querySelectorAll<HTMLElement>("[data-until]")) {
    el.textContent = resetText(el.dataset.until ?? "");
  }
  for (const el of root.querySelectorAll<HTMLElement>("[data-since]")) {
    el.textContent = duration(secondsSince(el.dataset.since ?? ""));
  }
}
