import type uPlot from "uplot";
import type { AlertEvent, Usage, UsagePoint } from "./api.js";
import { h } from "./dom.js";
import { dimensionWord, windowName } from "./figure-status.js";
import { axisTick, utc } from "./format.js";

// "Over time": the used % of requests and tokens (highest per window) per provider and model,
// with the range's alert events marked at their own time and used % (a shape per level, outlined,
// so that no mark reads as a series), and the reports per window below. A series keeps its colour
// from one load to the next: the colour is a hash of its name. Pointing at (or tapping) the chart
// reads its figures at that window in a line under it. Dragging across a chart asks for that range (the query changes, not the view).
// Every window of the range is on the axis: one without reports counts 0 and has no used %
// (a gap), never the value of the window before it.

// Distinct at a glance and on white; a series takes one by a hash of its name.
const PALETTE = [
  "#0b57d0",
  "#b3261e",
  "#1e7b34",
  "#8a4fbf",
  "#a15c00",
  "#00707a",
  "#c2185b",
  "#5f6368",
  "#3f51b5",
  "#6d4c41",
  "#1b1f24",
  "#827717",
  "#e65100",
];
/** FNV-1a, 32 bits: the same name gives the same colour at every load, whatever else is drawn. */
function hash(text: string): number {
  let x = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) x = Math.imul(x ^ text.charCodeAt(i), 0x01000193);
  return x >>> 0;
}
/** 13 named colours, then 48 hues at two lightnesses: a slot per hash, 109 in all. */
const SLOTS = 13 + 96;
const slotColour = (slot: number) =>
  PALETTE[slot] ?? `hsl(${Math.round(((slot - 13) % 48) * 7.5)} 70% ${slot - 13 < 48 ? 36 : 46}%)`;

/**
 * Each drawn series' colour: its name's slot; two drawn series whose names share a slot (rare)
 * are told apart by the later name (in order) taking the next free one.
 */
export function coloursOf(labels: string[]): Map<string, string> {
  const taken = new Set<number>();
  const colours = new Map<string, string>();
  for (const label of [...labels].sort()) {
    let slot = hash(label) % SLOTS;
    for (let i = 0; i < SLOTS && taken.has(slot); i++) slot = (slot + 1) % SLOTS;
    taken.add(slot);
    colours.set(label, slotColour(slot));
  }
  return colours;
}
const LEVEL_COLOUR: Record<AlertEvent["level"], string> = {
  warning: "#d49b00",
  critical: "#b3261e",
  resolved: "#1e7b34",
};
const WINDOW_S = { minute: 60, hour: 3_600, day: 86_400 } as const;

/** uPlot's script is a classic one (vendor/uPlot.iife.min.js) that sets a global. */
const UPlot = () => (window as unknown as { uPlot: typeof uPlot }).uPlot;

export interface Chart {
  show(usage: Usage, events: AlertEvent[]): void;
}

interface Series {
  label: string;
  requests: (number | null)[];
  tokens: (number | null)[];
}

const usedPct = (limit: number | null, remaining: number | null) =>
  limit === null || remaining === null || !(limit > 0)
    ? null
    : Math.round(Math.max(0, ((limit - remaining) / limit) * 100) * 100) / 100;

/**
 * A point's used % of requests and of tokens: from its windows (Anthropic's input and output
 * tokens count as tokens, the worst of them) when the answer has them, else from the contract's
 * figures.
 */
export function pointUsed(p: UsagePoint): { requests: number | null; tokens: number | null } {
  const dims = Object.entries(p.used_pct_by_dimension ?? {});
  const worst = (of: (d: string) => boolean) => {
    const v = dims.filter(([d]) => of(d)).map(([, pct]) => pct);
    return v.length === 0 ? null : Math.max(...v);
  };
  return {
    requests:
      worst((d) => d === "requests") ?? usedPct(p.requests_limit_max, p.requests_remaining_min),
    tokens:
      worst((d) => d.endsWith("tokens")) ?? usedPct(p.tokens_limit_max, p.tokens_remaining_min),
  };
}

/** Every window's start in the range, in seconds, with any bucket the answer has besides. */
function windows(usage: Usage): number[] {
  const step = WINDOW_S[usage.window];
  const from = Math.floor(Date.parse(usage.from) / 1000 / step) * step;
  const to = Date.parse(usage.to) / 1000;
  const x = new Set<number>();
  for (let t = from; t < to && x.size < 50_000; t += step) x.add(t);
  for (const p of usage.points) x.add(Date.parse(p.bucket) / 1000);
  return [...x].sort((a, b) => a - b);
}

/**
 * The usage points (grouped by provider and model) as columns on one time axis, in seconds;
 * only the series with a used % somewhere in the range, since the others draw nothing.
 */
export function columns(usage: Usage): { x: number[]; series: Series[]; reports: number[] } {
  const x = windows(usage);
  const index = new Map(x.map((t, i) => [t, i]));
  const bySeries = new Map<string, Series>();
  const reports = x.map(() => 0);
  for (const p of usage.points) {
    const i = index.get(Date.parse(p.bucket) / 1000) ?? 0;
    const label = `${p.provider ?? ""} · ${p.model ?? "(no model)"}`;
    let s = bySeries.get(label);
    if (!s) {
      s = { label, requests: x.map(() => null), tokens: x.map(() => null) };
      bySeries.set(label, s);
    }
    const pct = pointUsed(p);
    s.requests[i] = pct.requests;
    s.tokens[i] = pct.tokens;
    reports[i] = (reports[i] ?? 0) + p.reports;
  }
  const drawn = [...bySeries.values()]
    .filter((s) => s.requests.some((v) => v !== null) || s.tokens.some((v) => v !== null))
    .sort((a, b) => a.label.localeCompare(b.label));
  return { x, series: drawn, reports };
}

export interface ChartElements {
  used: HTMLElement;
  counts: HTMLElement;
  legend: HTMLElement;
  readout: HTMLElement;
  usedEmpty: HTMLElement;
  countsEmpty: HTMLElement;
  eventList: HTMLElement;
}

export function createChart(
  { used, counts, legend, readout, usedEmpty, countsEmpty, eventList }: ChartElements,
  onZoom: (from: number, to: number) => void,
): Chart {
  let usedPlot: uPlot | null = null;
  let countPlot: uPlot | null = null;
  let shape = "";
  let events: AlertEvent[] = [];
  let drawn: ReturnType<typeof columns> = { x: [], series: [], reports: [] };
  let range = { from: 0, to: 0 };

  // The chart's box, whatever the viewport: a phone's is narrower than any fixed minimum.
  const width = () => Math.max(200, used.clientWidth || used.parentElement?.clientWidth || 800);

  // Each event at its own time and its used %: a triangle (warning), a diamond (critical) or a
  // circle (resolved), filled with its level's colour and outlined in black.
  const markEvents = (u: uPlot) => {
    const ctx = u.ctx;
    const r = 6 * devicePixelRatio;
    const marks: { id: string; level: string; left: number; top: number }[] = [];
    ctx.save();
    ctx.lineWidth = 1.5 * devicePixelRatio;
    ctx.strokeStyle = "#1b1f24";
    for (const e of events) {
      const x = u.valToPos(Date.parse(e.at) / 1000, "x", true);
      const y = u.valToPos(Math.min(100, Math.max(0, e.used_pct)), "y", true);
      if (x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
      ctx.fillStyle = LEVEL_COLOUR[e.level];
      ctx.beginPath();
      if (e.level === "warning") {
        ctx.moveTo(x, y - r);
        ctx.lineTo(x + r, y + r * 0.8);
        ctx.lineTo(x - r, y + r * 0.8);
      } else if (e.level === "critical") {
        ctx.moveTo(x, y - r);
        ctx.lineTo(x + r, y);
        ctx.lineTo(x, y + r);
        ctx.lineTo(x - r, y);
      } else ctx.arc(x, y, r * 0.8, 0, 2 * Math.PI);
      ctx.closePath();
      ctx.fill();
      ctx.stroke();
      // Where it is, in CSS pixels from the plotting area's corner (the tests read it).
      marks.push({
        id: e.id,
        level: e.level,
        left: u.valToPos(Date.parse(e.at) / 1000, "x"),
        top: u.valToPos(Math.min(100, Math.max(0, e.used_pct)), "y"),
      });
    }
    ctx.restore();
    used.dataset.marks = JSON.stringify(marks);
  };

  // The figures at the window under the pointer, in words.
  const read = (u: uPlot) => {
    const i = u.cursor.idx;
    const t = i === null || i === undefined ? undefined : drawn.x[i];
    if (i === null || i === undefined || t === undefined) return;
    const figures = drawn.series
      .map((s) => {
        const parts = [
          s.requests[i] == null ? null : `requests ${s.requests[i]}%`,
          s.tokens[i] == null ? null : `tokens ${s.tokens[i]}%`,
        ].filter(Boolean);
        return parts.length === 0 ? null : `${s.label}: ${parts.join(", ")}`;
      })
      .filter(Boolean);
    const at = new Date(t * 1000).toISOString().replace("T", " ").slice(0, 16);
    const n = drawn.reports[i] ?? 0;
    readout.textContent = `${at} UTC · ${n} report${n === 1 ? "" : "s"}${
      figures.length > 0 ? ` · ${figures.join(" · ")}` : ""
    }`;
    readout.dataset.at = String(t * 1000);
  };

  const zoom = (u: uPlot) => {
    if (u.select.width < 2) return;
    const from = u.posToVal(u.select.left, "x") * 1000;
    const to = u.posToVal(u.select.left + u.select.width, "x") * 1000;
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    if (to - from >= 60_000) onZoom(Math.floor(from), Math.ceil(to));
  };

  // The axis shows the whole range asked for, even where no report fell.
  const fitRange = (u: uPlot) => u.setScale("x", { min: range.from / 1000, max: range.to / 1000 });
  const noteAxis = (u: uPlot) => {
    const el = u.root.parentElement;
    if (!el || u.scales.x?.min === undefined || u.scales.x.max === undefined) return;
    el.dataset.xMin = String(Math.round(u.scales.x.min * 1000));
    el.dataset.xMax = String(Math.round(u.scales.x.max * 1000));
  };

  // The page speaks 24-hour UTC, as the API does, whatever the browser's locale and time zone.
  const timeAxis: uPlot.Axis = {
    values: (u, splits) => {
      const span = (u.scales.x?.max ?? 0) - (u.scales.x?.min ?? 0);
      const ticks = splits.map((v) => axisTick(v, span));
      // The ticks are drawn on a canvas: their text is kept where a test can read it.
      if (u.root.parentElement) u.root.parentElement.dataset.ticks = JSON.stringify(ticks);
      return ticks;
    },
  };

  const common = (height: number): Omit<uPlot.Options, "series"> => ({
    width: width(),
    height,
    cursor: { drag: { x: true, y: false, setScale: false } },
    tzDate: (ts) => UPlot().tzDate(new Date(ts * 1000), "Etc/UTC"),
    scales: { x: { time: true } },
    // The legend is the page's own (one entry per drawn series); uPlot's would repeat "--".
    legend: { show: false },
    hooks: { setSelect: [zoom], setScale: [noteAxis] },
  });

  function build(cols: ReturnType<typeof columns>) {
    usedPlot?.destroy();
    countPlot?.destroy();
    const lines: uPlot.Series[] = [{ label: "Time (UTC)" }];
    const colours = coloursOf(cols.series.map((s) => s.label));
    const colourOf = (label: string) => colours.get(label) ?? "#0b57d0";
    cols.series.forEach((s) => {
      const stroke = colourOf(s.label);
      // Points as well as lines: a window with a value between two gaps has no line to draw.
      const points = { show: true, size: 5, stroke, fill: stroke };
      lines.push({ label: `${s.label} requests %`, stroke, width: 2, points });
      lines.push({ label: `${s.label} tokens %`, stroke, width: 2, dash: [6, 4], points });
    });
    legend.replaceChildren(
      ...cols.series.map((s) =>
        h(
          "li",
          { "data-colour": colourOf(s.label) },
          h("span", {
            class: "swatch",
            style: `background:${colourOf(s.label)}`,
            "aria-hidden": "true",
          }),
          s.label,
        ),
      ),
    );
    const base = common(260);
    usedPlot = new (UPlot())(
      {
        ...base,
        series: lines,
        scales: { ...base.scales, y: { range: [0, 100] } },
        axes: [timeAxis, { label: "used %" }],
        hooks: { ...base.hooks, draw: [markEvents], setCursor: [read] },
      },
      [[], ...lines.slice(1).map(() => [])],
      used,
    );
    const bars = UPlot().paths.bars?.({ size: [0.8, 24], align: 1 });
    countPlot = new (UPlot())(
      {
        ...common(140),
        series: [
          { label: "Time (UTC)" },
          {
            label: "reports",
            stroke: "#1b1f24",
            fill: "#1b1f2455",
            paths: bars,
            points: { show: false },
          },
        ],
        axes: [timeAxis, { label: "reports" }],
        hooks: { ...common(140).hooks, setCursor: [read] },
      },
      [[], []],
      counts,
    );
  }

  addEventListener("resize", () => {
    for (const u of [usedPlot, countPlot]) u?.setSize({ width: width(), height: u.height });
  });

  return {
    show(usage, evts) {
      range = { from: Date.parse(usage.from), to: Date.parse(usage.to) };
      events = evts;
      const cols = columns(usage);
      drawn = cols;
      const next = cols.series.map((s) => s.label).join("\n");
      if (!usedPlot || next !== shape) build(cols);
      shape = next;
      const data: (number | null)[][] = [cols.x];
      for (const s of cols.series) data.push(s.requests, s.tokens);
      usedPlot?.setData(data as uPlot.AlignedData);
      countPlot?.setData([cols.x, cols.reports]);
      for (const u of [usedPlot, countPlot]) if (u) fitRange(u);
      for (const el of [used, counts]) {
        el.dataset.from = usage.from;
        el.dataset.to = usage.to;
        el.dataset.window = usage.window;
        el.dataset.series = String(cols.series.length);
      }
      // What the reports chart draws, window by window (the tests read it).
      counts.dataset.drawn = cols.reports.join(",");
      usedEmpty.hidden = cols.series.length > 0;
      countsEmpty.hidden = cols.reports.some((n) => n > 0);
      eventList.replaceChildren(
        ...(evts.length > 0
          ? evts.map((e) =>
              h(
                "li",
                {},
                h("span", { class: `level-${e.level}` }, e.level),
                ` ${utc(e.at)} UTC · ${e.provider} · ${e.model ?? "(no model)"} · ${e.app} · ${eventWindow(e)} ${e.used_pct}% used`,
              ),
            )
          : [h("li", { class: "empty" }, "No alert events in this range.")]),
      );
    },
  };
}

/** "Requests per day": the window an alert event is about (its metric, for an old event). */
export function eventWindow(e: AlertEvent): string {
  const name = windowName(
    { dimension: e.dimension ?? e.metric, window: e.window ?? null, view: { resets_at: null } },
    0,
  );
  return e.window === undefined || e.window === null
    ? `${dimensionWord(e.dimension ?? e.metric)} (window length not stated)`
    : name;
}
