import type { Figures, MetricView, Status } from "./api.js";
import { h } from "./dom.js";
import {
  burnUnknown,
  exhaustionText,
  type Figure,
  type FigureStatus,
  figuresOf,
  isReset,
  metricStatus,
  rank,
  resetText,
  sourceTitle,
  windowName,
} from "./figure-status.js";
import { amount, count, duration, figure, pct, rate } from "./format.js";
import { type Grouping, noun, poolWords, type Unit, unitName } from "./now-units.js";

// "Now" as cards: a card per provider and, inside it, a part per pool (its member apps listed in
// it; a pool of one app is a part like a series') or, by app, per series, with requests,
// tokens and credits left as bars, each coloured by its own status, the reset countdown, the burn
// rate, the time to exhaustion and the age of the figures; under them, each window the provider
// states (dimension, length, what is left of its limit, reset), worst first, a window whose figures
// Headroom learned, was declared or counted tagged so beside them. A window that has
// reset since its last report reads as reset, its old % a detail. The same part is the table's
// detail row (now-table.ts). Countdowns and ages tick every second (tickClocks).

const WORDS: Record<string, string> = {
  ok: "OK",
  warning: "Warning",
  critical: "Critical",
  reset: "Reset",
  stale: "Stale",
};
export const word = (s: Status) => WORDS[s] ?? `${s.charAt(0).toUpperCase()}${s.slice(1)}`;
const UNITS = { requests: "requests", tokens: "tokens", credits: "credits" } as const;
const METRICS = ["requests", "tokens", "credits"] as const;

export function badge(status: Status) {
  return h("span", { class: `badge status-${status}`, "data-status": status }, word(status));
}

/** "1 critical, 2 warnings, 9 ok": how many pools (or series) are in each status, worst first. */
export function summary(series: Figures[]): string {
  const counts = new Map<Status, number>();
  for (const s of series) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([status, n]) => `${n} ${status === "warning" && n !== 1 ? "warnings" : status}`)
    .join(", ");
}

const shown = (m: MetricView) => m.limit !== null || m.remaining !== null;

/** A span whose text is the reset's, kept current by tickClocks. */
export const resetSpan = (iso: string) => h("span", { "data-until": iso }, resetText(iso));

/** "(was 100% used)": a reset window's old figure, as a detail. */
const was = (m: MetricView) =>
  m.used_pct === null
    ? null
    : h("span", { class: "was", "data-field": "was_used_pct" }, ` (was ${pct(m.used_pct)} used)`);

function metric(
  series: Figures,
  name: (typeof METRICS)[number],
  label: string,
  status: FigureStatus,
  sayBurn: boolean,
  now: number,
) {
  const m = series[name];
  if (!shown(m)) return null;
  const fmt = name === "credits" ? amount : count;
  // Credits have no window: a balance, not a limit that resets.
  const hasReset = name !== "credits";
  const reset = hasReset && isReset(m, now);
  const leftPct = reset || m.used_pct === null ? null : Math.max(0, 100 - m.used_pct);
  const fill = h("div");
  fill.style.width = `${leftPct ?? 0}%`;
  const value = (field: string, n: number | null, text: string) =>
    h("span", { "data-field": field, "data-value": n === null ? "" : String(n) }, text);
  return h(
    "div",
    { class: "metric", "data-metric": name, "data-status": status },
    h(
      "div",
      { class: "line" },
      h("strong", {}, label),
      reset
        ? h("span", {}, resetSpan(m.resets_at ?? ""), was(m))
        : h(
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
        // A meter needs a value; its text says when there is none to give.
        "aria-valuenow": leftPct === null ? 0 : Math.round(leftPct),
        "aria-valuetext": reset
          ? "window reset, no report since"
          : leftPct === null
            ? "unknown"
            : `${Math.round(leftPct)}% left`,
      },
      fill,
    ),
    reset
      ? null
      : h(
          "div",
          { class: "details" },
          hasReset
            ? m.resets_at
              ? resetSpan(m.resets_at)
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
                    ? burnUnknown(m, now)
                    : `burn ${rate(m.burn_per_s, UNITS[name])}`,
                ),
                " · ",
                h("span", { "data-field": "exhaustion_eta_s" }, exhaustionText(m, now, hasReset)),
              ]
            : null,
        ),
  );
}

/** "332 left of 14,400", or "332 left" without a limit. */
export const leftOf = (m: MetricView, dimension: string) => {
  const fmt = dimension === "credits" ? amount : count;
  if (m.limit === null) return `${fmt(m.remaining)} left`;
  // The unit once: "40 left of 100 credits".
  return `${dimension === "credits" ? figureOrDash(m.remaining) : count(m.remaining)} left of ${fmt(m.limit)}`;
};
const figureOrDash = (n: number | null) => (n === null ? "—" : figure(n));

/**
 * "counted", "declared" or "learned": a window whose figures are not the provider's statement,
 * said beside them, the why in its title and, for screen readers, in words after the tag.
 */
export function sourceTag(f: Figure) {
  const title = sourceTitle(f);
  if (title === null) return null;
  return [
    " ",
    h(
      "span",
      { class: "source-tag", "data-field": "source", "data-source": f.source, title },
      h("span", { "aria-hidden": "true" }, f.source),
      h("span", { class: "sr-only" }, `(${title})`),
    ),
  ];
}

/** The series' windows: one row each, worst first, each coloured by its own status. */
function windowsPart(s: Unit, figures: Figure[], now: number) {
  const list = figures.filter((f) => f.window !== undefined);
  if (list.length === 0) return null;
  const rows = list.map((f) => {
    const w = f.view;
    const reset = isReset(w, now);
    return h(
      "tr",
      {
        class: `status-${f.status}`,
        "data-dimension": f.dimension,
        "data-window": f.window ?? "",
        "data-used": w.used_pct === null ? "" : String(w.used_pct),
        "data-status": f.status,
        "data-source": f.source ?? "",
      },
      h("th", { scope: "row" }, windowName(f, now)),
      h(
        "td",
        { "data-field": "used_pct" },
        reset
          ? h("span", { class: "reset-word" }, "reset")
          : w.used_pct === null
            ? "–"
            : `${pct(w.used_pct)} used`,
      ),
      h("td", { "data-field": "left" }, reset ? was(w) : leftOf(w, f.dimension), sourceTag(f)),
      h(
        "td",
        { "data-field": "resets_at" },
        w.resets_at === null ? "no reset time" : resetSpan(w.resets_at),
      ),
    );
  });
  return h(
    "table",
    { class: "windows", "data-field": "windows", "aria-label": `Windows of ${unitName(s)}` },
    h("caption", {}, "Windows"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Window"),
        h("th", { scope: "col" }, "Used"),
        h("th", { scope: "col" }, "Left"),
        h("th", { scope: "col" }, "Resets"),
      ),
    ),
    h("tbody", {}, rows),
  );
}

/** A series' (or a pool of one app's) name after its model; a pool's is on the next line. */
const partWords = (u: Unit) =>
  !u.isPool || !u.pool || u.pool.kind === "app" ? ` · app ${u.apps.join(", ")}` : null;

const KIND_TITLES: Record<string, string> = {
  account: "Their provider named one account in its answers (kept as a keyed hash only)",
  label: "Their reports carry this pool label",
};

/** A pool's name, then its members: each app, its newest report's key id, when it last reported. */
function membersPart(u: Unit) {
  if (!u.isPool || !u.pool || u.pool.kind === "app") return null;
  const n = u.pool.members.length;
  const name = `${n} ${n === 1 ? "app" : "apps"} · ${poolWords(u.pool)}`;
  return [
    h(
      "p",
      {
        class: "details pool-name",
        "data-field": "pool-name",
        title: `${poolWords(u.pool)}: ${KIND_TITLES[u.pool.kind] ?? u.pool.kind} (pool id ${u.pool.id})`,
      },
      name,
    ),
    h(
      "ul",
      { class: "members", "data-field": "members", "aria-label": `Apps in ${unitName(u)}` },
      u.pool.members.map((m) =>
        h(
          "li",
          { "data-app": m.app, "data-key-id": m.key_id ?? "" },
          h("span", { class: "member-app", title: m.app }, m.app),
          h(
            "span",
            { class: "member-key", title: m.key_id ? `key ${m.key_id}` : "key not recorded" },
            m.key_id ?? "key not recorded",
          ),
          h(
            "span",
            { class: "member-seen" },
            "seen ",
            h("span", { "data-since": m.last_seen }, duration(secondsSince(m.last_seen))),
            " ago",
          ),
        ),
      ),
    ),
  ];
}

/** By app: the pool a series shares with other apps, named with them. */
function sharedPart(u: Unit) {
  if (u.isPool || !u.pool) return null;
  const others = u.pool.members.map((m) => m.app).filter((a) => !u.apps.includes(a));
  const text = `shares its limit with ${others.join(", ")} · ${poolWords(u.pool)}`;
  return h(
    "p",
    { class: "details shared", "data-field": "pool", "data-pool": u.pool.id, title: text },
    text,
  );
}

/**
 * One series or pool: its bars, its windows, a pool's members and the age of its figures (a
 * card's part, a detail row).
 */
export function seriesPart(s: Unit, now = Date.now(), heading: "h4" | "h3" = "h4") {
  // A report with only the provider's headers (or error body) has figures in its windows alone.
  const newestWindow = (s.windows ?? []).reduce<string | null>(
    (at, w) => (at === null || w.reported_at > at ? w.reported_at : at),
    null,
  );
  const reported = s.reported_at ?? s.credits_reported_at ?? newestWindow;
  const figures = figuresOf(s, now);
  // Said once for the series, not under every bar, when no figure of it has a burn yet.
  const metrics = METRICS.map((name) => s[name]).filter(shown);
  const noBurn =
    metrics.length > 0 &&
    metrics.every((m) => m.burn_per_s === null && m.exhaustion_eta_s === null) &&
    !metrics.some((m) => isReset(m, now));
  return h(
    "div",
    {
      class: "series",
      "data-provider": s.provider,
      "data-model": s.model ?? "",
      // One app: the series', or a pool of one; a pool of several names them in data-apps.
      "data-app": s.apps.length === 1 ? s.apps[0] : null,
      "data-apps": s.apps.join(","),
      "data-pool": s.isPool ? (s.pool?.id ?? "") : null,
      "data-kind": s.isPool ? (s.pool?.kind ?? "app") : null,
      "data-status": s.status,
    },
    h(
      heading,
      { class: "part-name" },
      // Long names are cut to the part's width; the whole name is the title.
      h(
        "span",
        { class: "name", title: unitName(s) },
        s.model ?? "(model not seen)",
        partWords(s) ? h("span", { class: "muted" }, partWords(s)) : null,
      ),
      badge(s.status),
    ),
    membersPart(s),
    sharedPart(s),
    METRICS.map((name) =>
      metric(
        s,
        name,
        name.charAt(0).toUpperCase() + name.slice(1),
        metricStatus(s, name, figures, now),
        !noBurn,
        now,
      ),
    ),
    windowsPart(s, figures, now),
    noBurn
      ? h(
          "p",
          { class: "details", "data-field": "burn" },
          `Burn rate and time to exhaustion unknown: ${burnUnknown(metrics[0] ?? s.requests, now).replace(/^burn unknown: /, "")}.`,
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

export const byRank = (a: Unit, b: Unit) =>
  rank(a.status) - rank(b.status) ||
  (a.model ?? "").localeCompare(b.model ?? "") ||
  a.apps.join(",").localeCompare(b.apps.join(",")) ||
  a.key.localeCompare(b.key);

export function renderCards(container: HTMLElement, series: Unit[], grouping: Grouping) {
  const now = Date.now();
  const byProvider = new Map<string, Unit[]>();
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
      // The status in words is each series' badge; the card's border says its worst by colour.
      return h(
        "article",
        {
          class: `card status-${worst}${list.length > 1 ? " wide" : ""}`,
          "data-provider": provider,
          "data-status": worst,
          "aria-labelledby": `card-${provider}`,
        },
        h(
          "h3",
          { id: `card-${provider}` },
          provider,
          list.length > 1
            ? h("span", { class: "muted" }, ` · ${list.length} ${noun(grouping, list.length)}`)
            : null,
        ),
        h(
          "div",
          { class: "parts" },
          list.map((s) => seriesPart(s, now)),
        ),
      );
    });
  container.replaceChildren(
    ...(cards.length > 0
      ? cards
      : [h("p", { class: "empty" }, "No reports yet: send one to the edge and it shows here.")]),
  );
}

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
