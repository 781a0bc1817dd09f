import type { Capacity, CapacityRow } from "./capacity.js";
import type { Figure, Target } from "./figure.js";
import type { BenchResults, RunInfo } from "./run-results.js";
import { ISSUE_48_TARGET, type ViewsFigures } from "./views-figures.js";

// The results as a markdown document: one table, each figure next to its target and its ratio to
// the ceiling; machine, options and settings above it. The same text is printed to the terminal.

const intFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 });

export function num(n: number): string {
  return Math.abs(n) >= 100 ? intFormat.format(n) : decFormat.format(n);
}

const withUnit = (n: number, unit: string) => (unit ? `${num(n)} ${unit}` : num(n));

function targetText(t: Target, unit: string): string {
  const op = t.op === ">=" ? "≥" : "≤";
  return t.on === "ratio" ? `${op} ${num(t.value)}× ceiling` : `${op} ${withUnit(t.value, unit)}`;
}

function row(f: Figure): string {
  const target = f.targets.map((t) => targetText(t, f.unit)).join(", ");
  const ceiling = f.ceiling ? `${num(f.ceiling.value)} (${f.ceiling.label})` : "";
  const ratio = f.ratio === null ? "" : `${num(f.ratio)}×`;
  const met = f.invalid !== null ? "**invalid**" : f.met === null ? "" : f.met ? "yes" : "**no**";
  const value = withUnit(f.value, f.unit);
  // A value over failed answers is shown struck out, with why, never as a result.
  const shown = f.invalid === null ? value : `~~${value}~~ (${f.invalid})`;
  return `| ${f.label} | ${shown} | ${target} | ${ceiling} | ${ratio} | ${met} |`;
}

function statuses(label: string, s: Record<string, number>, errors: number): string | null {
  const parts = Object.entries(s).map(([code, n]) => `${code}: ${num(n)}`);
  if (errors) parts.push(`connection errors/timeouts: ${num(errors)}`);
  return parts.length ? `- ${label}: ${parts.join(", ")}` : null;
}

const capacityRow = (c: CapacityRow, label = c.component) =>
  `| ${label} | ${c.processes} | ${num(c.cpuSeconds)} s | ${num(c.usPerReport)} µs | ${num(c.coresPer100k)} |`;

/** The capacity table: what an operator sizes a deployment with. */
export function renderCapacity(c: Capacity, phase = "end to end, saturated"): string[] {
  return [
    `Capacity (${phase}: each process's CPU from the start of the load until`,
    `ClickHouse held all ${num(c.reports)} accepted reports, per report):`,
    "",
    "| Component | Processes | CPU | CPU per report | Cores per 100,000 reports/s |",
    "|---|--:|--:|--:|--:|",
    ...c.components.map((row) => capacityRow(row)),
    capacityRow(c.pipeline, "**whole pipeline**"),
    `${capacityRow(c.generator, `load generator (${c.generator.name}), per request`)}`,
  ];
}

/** Machine, code, command, options and settings of a run, as a list. */
export function renderRunInfo(r: RunInfo): string[] {
  const m = r.machine;
  const settings = Object.entries(r.settings);
  return [
    `- Machine: ${m.cores} cores (${m.cpuModel}), ${m.memoryGiB} GiB memory, Node ${m.node}, ${m.platform}`,
    `- Code: commit ${r.source.commit}${
      r.source.changedFiles.length
        ? ` with uncommitted changes to ${r.source.changedFiles.join(", ")}`
        : ", no uncommitted changes to src/ or workers/"
    }`,
    `- Command: \`${r.command}\``,
    `- Options: ${Object.entries(r.options)
      .filter(([k]) => k !== "outDir")
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(", ")}`,
    `- Settings: ${settings.length ? settings.map(([k, v]) => `${k}=${v}`).join(", ") : "defaults (src/config.ts)"}`,
  ];
}

/** The figures as one table, a header row per section. */
export function renderFigures(figures: Figure[]): string[] {
  const lines = [
    "| Figure | Value | Target | Ceiling | Ratio | Met |",
    "|---|--:|---|--:|--:|:-:|",
  ];
  let section = "";
  for (const f of figures) {
    if (f.section !== section) {
      section = f.section;
      lines.push(`| **${section}** | | | | | |`);
    }
    lines.push(row(f));
  }
  return lines;
}

export function renderMarkdown(r: BenchResults): string {
  const m = r.machine;
  const lines = [
    `# Headroom benchmark, ${m.date}`,
    "",
    ...renderRunInfo(r),
    `- Load generators (wrk when saturated, the open-loop client at a fixed rate), servers, Redis and ClickHouse share the same ${m.cores} cores.`,
    `- Targets met: **${r.summary.met} of ${r.summary.targets}**`,
    "",
    ...renderFigures(r.figures),
  ];
  const notes = [
    statuses("edge alone, non-200", r.edgeAlone.load.statuses, r.edgeAlone.load.errors),
    statuses("edge alone in batches, non-200", r.edgeBatch.load.statuses, r.edgeBatch.load.errors),
    r.edgeOtlp
      ? statuses(
          "edge alone with OTLP exports, non-200",
          r.edgeOtlp.load.statuses,
          r.edgeOtlp.load.errors,
        )
      : null,
    statuses("end to end saturated, non-200", r.saturation.load.statuses, r.saturation.load.errors),
    statuses("end to end fixed rate, non-200", r.fixedRate.load.statuses, r.fixedRate.load.errors),
  ].filter((l): l is string => l !== null);
  if (notes.length) lines.push("", ...notes);
  lines.push("", ...renderCapacity(r.capacity));
  if (r.batchCapacity) {
    lines.push(
      "",
      ...renderCapacity(r.batchCapacity, `in batches of ${r.edgeBatch.batchSize}, phase 2b`),
    );
  }
  if (r.clickhouseViews) {
    lines.push(
      "",
      ...renderViewsFigures(r.clickhouseViews.figures, r.clickhouseViews.rowsPerInsert),
    );
  }
  lines.push(
    "",
    "Latency is measured by the load generator: closed loop (wrk, one per edge; with several, the",
    "highest of their percentiles) when saturated, from the scheduled send time (the open-loop",
    "client) at a fixed rate. Lag is ClickHouse `inserted_at - received_at` over each phase's",
    "reports. Stored/s = the phase's rows / (last inserted_at - first received_at - lag p50), at",
    "most their count over the load's duration; sustained = min(accepted/s, stored/s). Issue 12's",
    "raw insert row = the ClickHouse server's and the insert client's CPU per row of the raw insert.",
    "",
  );
  return lines.join("\n");
}

const us = (n: number) => `${num(Math.round(n * 100) / 100)} µs`;
const pct = (n: number) => `${Math.round(n * 100)}%`;

/** Issue 48's views' figures as markdown: the ratio's table, then the views' breakdown. */
export function renderViewsFigures(f: ViewsFigures, rowsPerInsert: number): string[] {
  const met = f.ratio.engineUs <= ISSUE_48_TARGET ? "yes" : "**no**";
  const lines = [
    `ClickHouse CPU per report, inserts of ${num(rowsPerInsert)} rows in RowBinary (the worker's sink),`,
    "merges stopped while measured (median of the rounds):",
    "",
    "| Figure | Engine (system.events) | Server process (/proc) | Target | Met |",
    "|---|--:|--:|--:|:-:|",
    `| \`reports\` with every view | ${us(f.all.engineUs)} | ${us(f.all.processUs)} | | |`,
    `| \`reports\` alone (same DDL, no view) | ${us(f.reportsAlone.engineUs)} | ${us(f.reportsAlone.processUs)} | | |`,
    `| issue 48: every view ÷ \`reports\` alone | ${num(f.ratio.engineUs)}× | ${num(f.ratio.processUs)}× | ≤ ${ISSUE_48_TARGET}× | ${met} |`,
  ];
  if (f.merges) {
    lines.push(
      `| merges after them, every view / alone | ${us(f.merges.all.engineUs)} / ${us(f.merges.reportsAlone.engineUs)} | ${us(f.merges.all.processUs)} / ${us(f.merges.reportsAlone.processUs)} | | |`,
    );
  }
  lines.push(
    "",
    "What each view adds to `reports` alone (that view alone beside `reports`, minus `reports` alone):",
    "",
    "| View | Engine per report | Process per report | Share of what every view adds |",
    "|---|--:|--:|--:|",
    ...f.views.map(
      (v) => `| ${v.view} | ${us(v.engineUs)} | ${us(v.processUs)} | ${pct(v.share)} |`,
    ),
    `| (sum of the views alone) | ${us(f.views.reduce((s, v) => s + v.engineUs, 0))} | ${us(f.views.reduce((s, v) => s + v.processUs, 0))} | |`,
    `| (every view together) | ${us(f.all.engineUs - f.reportsAlone.engineUs)} | ${us(f.all.processUs - f.reportsAlone.processUs)} | 100% |`,
  );
  return lines;
}
