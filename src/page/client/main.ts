import {
  type AlertEvent,
  getJson,
  type Headroom,
  KeyRefused,
  type Page,
  type Report,
  type Spend,
  type Usage,
} from "./api.js";
import { byId, h } from "./dom.js";
import { rank } from "./figure-status.js";
import { parseUtcMinute, utcMinute } from "./format.js";
import { forgetKey, saveKey, takeKey } from "./key.js";
import { renderCards, summary, tickClocks, word } from "./now-cards.js";
import { type Filters, matches, renderTable } from "./now-table.js";
import { type Grouping, unitsOf } from "./now-units.js";
import { createChart } from "./over-time.js";
import { renderAlerts, renderLog, renderModels, renderSpend } from "./tables.js";

// The headroom page: asks for a read key when the tab has none, then shows the project's
// headroom and keeps it current by polling the read API (the latest figures every 2 s, the
// range's series, tables and log every 6 s while the range ends now).

const HEADROOM_EVERY_MS = 2_000;
const RANGE_EVERY_MS = 6_000;
const LOG_PAGE = 20;
const SPANS: Record<string, number> = {
  "1h": 3_600_000,
  "6h": 6 * 3_600_000,
  "24h": 24 * 3_600_000,
  "7d": 7 * 86_400_000,
  "30d": 30 * 86_400_000,
};

type Range = { kind: string; from: number; to: number };

const state = {
  key: null as string | null,
  /** "fit" until the first answer says which span holds the data (fitRange). */
  range: { kind: "fit", from: 0, to: 0 } as Range,
  view: "table" as "table" | "cards",
  /** By pool (one figure per provider limit, docs/pools.md) unless a team asks by app. */
  grouping: "pool" as Grouping,
  filters: { provider: "", model: "", app: "", status: "" } as Filters,
  open: new Set<string>(),
  headroom: { at: "" } as Headroom,
  log: { provider: "", app: "", cursors: [""] as string[], next: null as string | null },
  timers: [] as number[],
  firstFigures: false,
};

const el = {
  state: byId("state"),
  signin: byId("signin"),
  keyForm: byId<HTMLFormElement>("key-form"),
  keyInput: byId<HTMLInputElement>("key-input"),
  keyError: byId("key-error"),
  changeKey: byId<HTMLButtonElement>("change-key"),
  dashboard: byId("dashboard"),
  cards: byId("cards"),
  summary: byId("summary"),
  views: byId("views"),
  grouping: byId("grouping"),
  appColumn: byId("now-app-col"),
  seriesColumn: byId("now-series-col"),
  tableView: byId("now-table-view"),
  nowTable: byId<HTMLTableElement>("now-table"),
  nowCount: byId("now-count"),
  nowProvider: byId<HTMLSelectElement>("now-provider"),
  nowModel: byId<HTMLSelectElement>("now-model"),
  nowApp: byId<HTMLSelectElement>("now-app"),
  nowStatus: byId<HTMLSelectElement>("now-status"),
  ranges: byId("ranges"),
  custom: byId<HTMLFormElement>("custom-range"),
  customFrom: byId<HTMLInputElement>("custom-from"),
  customTo: byId<HTMLInputElement>("custom-to"),
  rangeLabel: byId("range-label"),
  models: byId<HTMLTableElement>("models"),
  log: byId<HTMLTableElement>("log"),
  logProvider: byId<HTMLSelectElement>("log-provider"),
  logApp: byId<HTMLSelectElement>("log-app"),
  logNewer: byId<HTMLButtonElement>("log-newer"),
  logOlder: byId<HTMLButtonElement>("log-older"),
  logPage: byId("log-page"),
  alerts: byId<HTMLTableElement>("alerts"),
  spend: byId<HTMLTableElement>("spend"),
};

const chart = createChart(
  {
    used: byId("chart-used"),
    counts: byId("chart-reports"),
    legend: byId("chart-legend"),
    readout: byId("chart-readout"),
    usedEmpty: byId("chart-used-empty"),
    countsEmpty: byId("chart-reports-empty"),
    eventList: byId("events-in-range"),
  },
  (from, to) => setRange({ kind: "custom", from, to }),
);

function say(text: string) {
  el.state.textContent = text;
}

function showSignin(message = "") {
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
  state.key = null;
  el.dashboard.hidden = true;
  el.changeKey.hidden = true;
  el.signin.hidden = false;
  el.keyError.textContent = message;
  say(message ? "Signed out" : "A read key is needed");
  el.keyInput.value = "";
  el.keyInput.focus();
}

function refused(err: KeyRefused) {
  forgetKey();
  const why =
    err.code === "insufficient_scope"
      ? "This key cannot read: it is a report key. Enter a read key (it starts with hrr_)."
      : err.code === "missing_project_key"
        ? "A read key is needed."
        : "This key was refused: it is wrong or has been revoked. Enter another read key.";
  showSignin(why);
}

/** Runs one refresh; a refused key signs out, anything else is said and retried next time. */
async function guarded(what: string, run: () => Promise<void>) {
  try {
    await run();
  } catch (err) {
    if (err instanceof KeyRefused) refused(err);
    else say(`Could not refresh ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

const MINUTE = 60_000;

/** The shown range's bounds, Unix ms: a preset's ends at the next whole minute. */
function rangeBounds(): { from: number; to: number } {
  const r = state.range;
  if (r.kind === "custom") {
    return { from: Math.floor(r.from / MINUTE) * MINUTE, to: Math.ceil(r.to / MINUTE) * MINUTE };
  }
  const to = Math.ceil(Date.now() / MINUTE) * MINUTE;
  return { from: to - (SPANS[r.kind] ?? SPANS["24h"] ?? 0), to };
}

/**
 * The range to ask for: a preset as `last` (the same query at every poll, so the API shares one
 * answer however the clock turns, docs/read-api.md), a custom one in whole minutes.
 */
function currentRange(): Record<string, string> {
  const r = state.range;
  if (r.kind !== "custom") return { last: SPANS[r.kind] === undefined ? "24h" : r.kind };
  const { from, to } = rangeBounds();
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

function fillOptions(
  select: HTMLSelectElement,
  values: string[],
  label: (v: string) => string = (v) => v,
  order: (a: string, b: string) => number = (a, b) => a.localeCompare(b),
) {
  const have = [...select.options].map((o) => o.value).slice(1);
  const want = [...new Set(values)].sort(order);
  if (have.join("\n") === want.join("\n")) return;
  const chosen = select.value;
  select.replaceChildren(
    h("option", { value: "" }, "All"),
    ...want.map((v) => h("option", { value: v }, label(v))),
  );
  // A chosen value no series has any more stays chosen: the filter says so, showing none.
  if (chosen && !want.includes(chosen))
    select.append(h("option", { value: chosen }, label(chosen)));
  select.value = chosen;
}

/** The "Now" section from the latest answer: the summary, the filters, the table or the cards. */
function renderNow() {
  const grouping = state.grouping;
  const units = unitsOf(state.headroom, grouping);
  el.summary.textContent = summary(units);
  fillOptions(
    el.nowProvider,
    units.map((s) => s.provider),
  );
  fillOptions(
    el.nowModel,
    units.map((s) => s.model ?? ""),
    (v) => v || "(model not seen)",
  );
  fillOptions(
    el.nowApp,
    units.flatMap((s) => s.apps),
  );
  fillOptions(
    el.nowStatus,
    units.map((s) => s.status),
    word,
    (a, b) => rank(a) - rank(b) || a.localeCompare(b),
  );
  el.appColumn.textContent = grouping === "pool" ? "Apps" : "App";
  el.seriesColumn.textContent = grouping === "pool" ? "Pool" : "Series";
  el.tableView.hidden = state.view !== "table";
  el.cards.hidden = state.view !== "cards";
  if (state.view === "table") {
    renderTable(el.nowTable, el.nowCount, units, grouping, state.filters, state.open, (key) => {
      if (!state.open.delete(key)) state.open.add(key);
      renderNow();
    });
  } else {
    const f = state.filters;
    renderCards(
      el.cards,
      units.filter((u) => matches(u, f)),
      grouping,
    );
  }
}

async function refreshHeadroom(key: string) {
  const headroom = await getJson<Headroom>(key, "headroom");
  if (state.key !== key) return;
  const series = headroom.series ?? [];
  state.headroom = headroom;
  renderNow();
  fillOptions(
    el.logProvider,
    series.map((s) => s.provider),
  );
  fillOptions(
    el.logApp,
    series.map((s) => s.app),
  );
  say(`Updated ${new Date().toLocaleTimeString("en-GB", { timeZone: "UTC" })} UTC`);
  if (!state.firstFigures) {
    state.firstFigures = true;
    // How long from navigation to the first figures on screen (docs/page.md: time to first figures).
    document.documentElement.dataset.firstFiguresMs = String(Math.round(performance.now()));
  }
}

/** The chart, the per-model table, the alerts and the spend: each shown as soon as it comes. */
function refreshRange(key: string) {
  const range = currentRange();
  const current = () => state.key === key;
  let events: AlertEvent[] | null = null;
  let usage: Usage | null = null;
  const showChart = () => {
    if (usage && events && current()) chart.show(usage, events);
  };
  return Promise.all([
    guarded("the chart", async () => {
      usage = await getJson<Usage>(key, "usage", { ...range, group_by: "provider,model" });
      if (!current()) return;
      el.rangeLabel.textContent = `${utcMinute(Date.parse(usage.from))} to ${utcMinute(
        Date.parse(usage.to),
      )} UTC, ${usage.window} windows`;
      renderModels(el.models, usage);
      showChart();
    }),
    guarded("the alerts", async () => {
      const page = await getJson<Page<AlertEvent>>(key, "alerts/events", {
        ...range,
        limit: "100",
      });
      events = page.items;
      if (!current()) return;
      renderAlerts(el.alerts, page.items);
      showChart();
    }),
    guarded("the spend", async () => {
      const spend = await getJson<Spend>(key, "spend", range);
      if (current()) renderSpend(el.spend, spend);
    }),
  ]);
}

async function refreshLog(key: string) {
  const { provider, app, cursors } = state.log;
  const page = await getJson<Page<Report>>(key, "reports", {
    limit: String(LOG_PAGE),
    provider,
    app,
    cursor: cursors[cursors.length - 1],
    ...currentRange(),
  });
  if (state.key !== key) return;
  renderLog(el.log, page.items);
  state.log.next = page.next_cursor;
  el.logOlder.disabled = page.next_cursor === null;
  el.logNewer.disabled = cursors.length <= 1;
  el.logPage.textContent = `Page ${cursors.length}`;
}

/**
 * The default range: the smallest of 1 h, 6 h, 24 h and 7 d that holds every report of the last
 * 7 days (ten minutes of traffic is not a few dots at the right edge of a day); 24 h when there
 * is none. A range picked before the answer comes stays picked.
 */
async function fitRange(key: string) {
  const reports = async (span: string) => {
    const usage = await getJson<Usage>(key, "usage", { last: span });
    return usage.points.reduce((n, p) => n + p.reports, 0);
  };
  let kind = "24h";
  try {
    const all = await reports("7d");
    if (all > 0) {
      for (const k of ["1h", "6h", "24h", "7d"]) {
        if ((await reports(k)) >= all) {
          kind = k;
          break;
        }
      }
    }
  } catch (err) {
    if (err instanceof KeyRefused) throw err;
  }
  if (state.key === key && state.range.kind === "fit") setRange({ kind, from: 0, to: 0 });
}

function markRange() {
  for (const radio of el.ranges.querySelectorAll<HTMLInputElement>("input[name=range]")) {
    radio.checked = radio.value === state.range.kind;
  }
  el.custom.hidden = state.range.kind !== "custom";
}

function setRange(range: Range) {
  state.range = range;
  if (range.kind === "custom") {
    el.customFrom.value = utcMinute(range.from);
    el.customTo.value = utcMinute(range.to);
  }
  markRange();
  state.log.cursors = [""];
  const key = state.key;
  if (!key) return;
  void refreshRange(key);
  void guarded("the log", () => refreshLog(key));
}

/**
 * A table's box scrolls sideways on a narrow screen: it takes the keyboard's focus and its
 * table's name, so that it can be scrolled without a mouse (axe: scrollable-region-focusable).
 */
function scrollBoxes() {
  for (const box of document.querySelectorAll<HTMLElement>(".scroll[data-labelledby]")) {
    box.tabIndex = 0;
    box.setAttribute("role", "region");
    box.setAttribute("aria-labelledby", box.dataset.labelledby ?? "");
  }
}

function wireControls() {
  scrollBoxes();
  el.views.addEventListener("change", (e) => {
    state.view = (e.target as HTMLInputElement).value === "cards" ? "cards" : "table";
    renderNow();
  });
  el.grouping.addEventListener("change", (e) => {
    state.grouping = (e.target as HTMLInputElement).value === "app" ? "app" : "pool";
    renderNow();
  });
  const nowFilter = () => {
    state.filters = {
      provider: el.nowProvider.value,
      model: el.nowModel.value,
      app: el.nowApp.value,
      status: el.nowStatus.value,
    };
    renderNow();
  };
  for (const select of [el.nowProvider, el.nowModel, el.nowApp, el.nowStatus])
    select.addEventListener("change", nowFilter);
  el.keyForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const key = el.keyInput.value.trim();
    if (!key) return;
    saveKey(key);
    start(key);
  });
  el.changeKey.addEventListener("click", () => {
    forgetKey();
    showSignin();
  });
  // Native radios: the arrow keys move the choice, Tab leaves the group.
  el.ranges.addEventListener("change", (e) => {
    const kind = (e.target as HTMLInputElement).value;
    if (kind === "custom") {
      setRange({ kind, ...rangeBounds() });
    } else setRange({ kind, from: 0, to: 0 });
  });
  el.custom.addEventListener("submit", (e) => {
    e.preventDefault();
    const from = parseUtcMinute(el.customFrom.value);
    const to = parseUtcMinute(el.customTo.value);
    if (Number.isNaN(from) || Number.isNaN(to)) {
      say("Write the custom range's times as YYYY-MM-DD HH:MM, in UTC (24-hour).");
      return;
    }
    if (!(from < to)) {
      say("The custom range must start before it ends.");
      return;
    }
    setRange({ kind: "custom", from, to });
  });
  const filter = () => {
    state.log = { provider: el.logProvider.value, app: el.logApp.value, cursors: [""], next: null };
    const key = state.key;
    if (key) void guarded("the log", () => refreshLog(key));
  };
  el.logProvider.addEventListener("change", filter);
  el.logApp.addEventListener("change", filter);
  el.logOlder.addEventListener("click", () => {
    if (state.log.next === null) return;
    state.log.cursors.push(state.log.next);
    const key = state.key;
    if (key) void guarded("the log", () => refreshLog(key));
  });
  el.logNewer.addEventListener("click", () => {
    if (state.log.cursors.length > 1) state.log.cursors.pop();
    const key = state.key;
    if (key) void guarded("the log", () => refreshLog(key));
  });
}

function start(key: string) {
  state.key = key;
  el.signin.hidden = true;
  el.keyError.textContent = "";
  el.dashboard.hidden = false;
  el.changeKey.hidden = false;
  say("Loading…");
  markRange();
  void guarded("the headroom", () => refreshHeadroom(key));
  if (state.range.kind === "fit") void guarded("the range", () => fitRange(key));
  else {
    void refreshRange(key);
    void guarded("the log", () => refreshLog(key));
  }
  state.timers.push(
    setInterval(() => void guarded("the headroom", () => refreshHeadroom(key)), HEADROOM_EVERY_MS),
    setInterval(() => {
      if (state.range.kind !== "custom" && state.range.kind !== "fit") void refreshRange(key);
      if (state.log.cursors.length === 1) void guarded("the log", () => refreshLog(key));
    }, RANGE_EVERY_MS),
    setInterval(() => tickClocks(el.dashboard), 1_000),
  );
}

wireControls();
const key = takeKey();
if (key) start(key);
else showSignin();
