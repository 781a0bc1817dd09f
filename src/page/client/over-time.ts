import type uPlot from "uplot";
import type { AlertEvent, Usage } from "./api.js";
import { h } from "./dom.js";
import { utc } from "./format.js";

// "Over time": the used % of requests and tokens (highest per window) per provider and model,
// with the range's alert events drawn as vertical lines on the same time axis, and the reports
// per window below. Dragging across a chart asks for that range (the query changes, not the view).

const PALETTE = ["#0b57d0", "#b3261e", "#1e7b34", "#8a4fbf", "#a15c00", "#00707a", "#5f6368"];
const LEVEL_COLOUR: Record<AlertEvent["level"], string> = {
  warning: "#d49b00",
  critical: "#b3261e",
  resolved: "#1e7b34",
};

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

/** The usage points (grouped by provider and model) as columns on one time axis, in seconds. */
export function columns(usage: Usage): { x: number[]; series: Series[]; reports: number[] } {
  const x = [...new Set(usage.points.map((p) => Date.parse(p.bucket) / 1000))].sort(
    (a, b) => a - b,
  );
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
    s.requests[i] = usedPct(p.requests_limit_max, p.requests_remaining_min);
    s.tokens[i] = usedPct(p.tokens_limit_max, p.tokens_remaining_min);
    reports[i] = (reports[i] ?? 0) + p.reports;
  }
  return { x, series: [...bySeries.values()], reports };
}

export function createChart(
  used: HTMLElement,
  counts: HTMLElement,
  eventList: HTMLElement,
  onZoom: (from: number, to: number) => void,
): Chart {
  let usedPlot: uPlot | null = null;
  let countPlot: uPlot | null = null;
  let shape = "";
  let events: AlertEvent[] = [];
  let range = { from: 0, to: 0 };

  const width = () => Math.max(300, used.clientWidth || used.parentElement?.clientWidth || 800);

  const markEvents = (u: uPlot) => {
    const ctx = u.ctx;
    ctx.save();
    ctx.lineWidth = 2 * devicePixelRatio;
    for (const e of events) {
      const x = Math.round(u.valToPos(Date.parse(e.at) / 1000, "x", true));
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.strokeStyle = LEVEL_COLOUR[e.level];
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    }
    ctx.restore();
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

  const common = (height: number): Omit<uPlot.Options, "series"> => ({
    width: width(),
    height,
    cursor: { drag: { x: true, y: false, setScale: false } },
    // The page speaks UTC, as the API does, whatever the browser's time zone.
    tzDate: (ts) => UPlot().tzDate(new Date(ts * 1000), "Etc/UTC"),
    scales: { x: { time: true } },
    hooks: { setSelect: [zoom], setScale: [noteAxis] },
  });

  function build(cols: ReturnType<typeof columns>) {
    usedPlot?.destroy();
    countPlot?.destroy();
    const lines: uPlot.Series[] = [{ label: "Time (UTC)" }];
    cols.series.forEach((s, i) => {
      const stroke = PALETTE[i % PALETTE.length] ?? "#000";
      lines.push({ label: `${s.label} requests %`, stroke, width: 2, spanGaps: true });
      lines.push({ label: `${s.label} tokens %`, stroke, width: 2, dash: [6, 4], spanGaps: true });
    });
    const base = common(260);
    usedPlot = new (UPlot())(
      {
        ...base,
        series: lines,
        scales: { ...base.scales, y: { range: [0, 100] } },
        axes: [{}, { label: "used %" }],
        hooks: { ...base.hooks, draw: [markEvents] },
      },
      [[], ...lines.slice(1).map(() => [])],
      used,
    );
    countPlot = new (UPlot())(
      {
        ...common(140),
        series: [
          { label: "Time (UTC)" },
          { label: "reports", stroke: "#1b1f24", fill: "#1b1f2422" },
        ],
        axes: [{}, { label: "reports" }],
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
      eventList.replaceChildren(
        ...(evts.length > 0
          ? evts.map((e) =>
              h(
                "li",
                {},
                h("span", { class: `level-${e.level}` }, e.level),
                ` ${utc(e.at)} · ${e.provider} · ${e.model ?? "(no model)"} · ${e.app} · ${e.metric} ${e.used_pct}% used`,
              ),
            )
          : [h("li", { class: "empty" }, "No alert events in this range.")]),
      );
    },
  };
}
