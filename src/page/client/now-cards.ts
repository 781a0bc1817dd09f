import type { SeriesView, Status } from "./api.js";
import { h } from "./dom.js";
import { amount, count, duration, pct, perSecond } from "./format.js";

// "Now": a card per provider and, inside it, a part per model and app, with requests, tokens
// and credits left as bars coloured by status, the status in words, the reset countdown, the burn
// rate, the time to exhaustion and the age of the figures. Countdowns and ages tick every second
// (tickClocks) between two answers of the API.

const SEVERITY: Record<Status, number> = { ok: 0, stale: 1, warning: 2, critical: 3 };
const WORDS: Record<Status, string> = {
  ok: "OK",
  warning: "Warning",
  critical: "Critical",
  stale: "Stale",
};

function badge(status: Status) {
  return h("span", { class: `badge status-${status}`, "data-status": status }, WORDS[status]);
}

function metric(series: SeriesView, name: "requests" | "tokens" | "credits", label: string) {
  const m = series[name];
  if (m.limit === null && m.remaining === null) return null;
  const fmt = name === "credits" ? amount : count;
  const leftPct = m.used_pct === null ? null : Math.max(0, 100 - m.used_pct);
  // The bars of a series take its status, which the API works out from the project's rules.
  const status = series.status;
  const fill = h("div");
  fill.style.width = `${leftPct ?? 0}%`;
  const value = (field: string, n: number | null, text: string) =>
    h("span", { "data-field": field, "data-value": n === null ? "" : String(n) }, text);
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
        value("limit", m.limit, fmt(m.limit)),
        " (",
        value("used_pct", m.used_pct, pct(m.used_pct)),
        " used)",
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
      m.resets_at
        ? [h("span", { "data-until": m.resets_at }, resetText(m.resets_at)), " · "]
        : null,
      "burn ",
      h("span", { "data-field": "burn_per_s" }, perSecond(m.burn_per_s)),
      " · ",
      h(
        "span",
        { "data-field": "exhaustion_eta_s" },
        m.exhaustion_eta_s === null
          ? "not exhausted before the reset"
          : `exhausted in ${duration(m.exhaustion_eta_s)}`,
      ),
    ),
  );
}

function seriesPart(s: SeriesView) {
  const reported = s.reported_at ?? s.credits_reported_at;
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
    metric(s, "requests", "Requests"),
    metric(s, "tokens", "Tokens"),
    metric(s, "credits", "Credits"),
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

export function renderCards(container: HTMLElement, series: SeriesView[]) {
  const byProvider = new Map<string, SeriesView[]>();
  for (const s of series) byProvider.set(s.provider, [...(byProvider.get(s.provider) ?? []), s]);
  const cards = [...byProvider].map(([provider, list]) => {
    const worst = list.reduce<Status>(
      (w, s) => (SEVERITY[s.status] > SEVERITY[w] ? s.status : w),
      "ok",
    );
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
  container.replaceChildren(
    ...(cards.length > 0
      ? cards
      : [h("p", { class: "empty" }, "No reports yet: send one to the edge and it shows here.")]),
  );
}

function resetText(iso: string) {
  const s = secondsUntil(iso);
  return s > 0 ? `resets in ${duration(s)}` : "reset time passed";
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
