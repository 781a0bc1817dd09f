import { batchEdgeUs } from "./batch-figures.js";
import type { EdgeMatrixCell, EdgeMatrixRun } from "./edge-matrix-run.js";
import { atMost, type Figure, figure, ISSUE_36, perUnitUs, summarize } from "./figure.js";
import { cpuFigures } from "./figures.js";
import type { LoadResult } from "./load-spec.js";
import { renderFigures, renderRunInfo } from "./render.js";
import { componentCores } from "./targets.js";

// The edge matrix's figures (issue 36's edge rows) and its markdown: for each generator and
// connections, bare Fastify's CPU per request, and the edge's per single report and per report in
// batches of 100 as ratios to it, with the edge's peak RSS at saturation beside bare Fastify's.

export interface EdgeMatrixResults extends EdgeMatrixRun {
  version: 1;
  figures: Figure[];
  summary: { targets: number; met: number };
}

const nonOk = (load: { statuses: Record<string, number>; errors: number }) =>
  Object.values(load.statuses).reduce((a, b) => a + b, 0) + load.errors;

/** The generator's and the other processes' CPU of one phase (the servers' are in the ratios). */
const outside = (
  id: string,
  section: string,
  cores: Record<string, number>,
  load: LoadResult,
  during: string,
) =>
  cpuFigures(id, section, cores, load, during).filter(
    (f) => f.id.endsWith(".cpu.load") || f.id.endsWith(".cpu.others"),
  );

/** One edge phase of a cell: what it accepted, its CPU per report ÷ bare's, its peak RSS. */
function edgeRunFigures(
  id: string,
  section: string,
  run: {
    name: string;
    acceptedPerSec: number;
    us: number;
    rssMb: number;
    load: LoadResult;
    cpuVsBare: number;
    rssMb36: number;
  },
  bare: { us: number; perSec: number; rssMb: number },
): Figure[] {
  return [
    figure(
      `${id}.accepted`,
      section,
      `edge, ${run.name}: accepted`,
      run.acceptedPerSec,
      "reports/s",
      {
        ceiling: { label: "bare Fastify req/s", value: bare.perSec },
      },
    ),
    figure(
      `${id}.cpuPerReport`,
      section,
      `edge CPU per report, ${run.name} ÷ bare per request`,
      run.us,
      "µs",
      {
        targets: [atMost(run.cpuVsBare, "ratio")],
        ceiling: { label: "bare Fastify per request", value: bare.us },
      },
    ),
    figure(`${id}.rss`, section, `edge peak RSS, ${run.name}`, run.rssMb, "MB", {
      targets: [atMost(run.rssMb36)],
      // What a bare Fastify process grows to under the same load: the bound's room above it.
      ceiling: { label: "bare Fastify's, same load", value: bare.rssMb },
    }),
    figure(
      `${id}.non200`,
      section,
      `edge, ${run.name}: answers other than 200 (incl. errors)`,
      nonOk(run.load),
      "count",
    ),
  ];
}

function cellFigures(c: EdgeMatrixCell): Figure[] {
  const id = `${c.generator}.c${c.connections}`;
  const S = `${c.generator} at ${c.connections} connections`;
  // To a tenth of a µs: the ratios compare figures of 3 to 40 µs.
  const bare = {
    us: perUnitUs(c.bare.cpuCores["bare Fastify"], c.bare.load.okPerSec, 1),
    perSec: c.bare.load.okPerSec,
    rssMb: c.bare.peakRssMb["bare Fastify"] ?? 0,
  };
  return [
    figure(`${id}.bare`, S, "bare Fastify, same POST", bare.perSec, "req/s"),
    figure(`${id}.bare.cpuPerRequest`, S, "bare Fastify CPU per request", bare.us, "µs"),
    ...edgeRunFigures(
      `${id}.edge`,
      S,
      {
        name: "single reports",
        acceptedPerSec: c.edge.load.okPerSec,
        us: perUnitUs(componentCores(c.edge.cpuCores, "edge"), c.edge.load.okPerSec, 1),
        rssMb: c.edge.edgePeakRssMb,
        load: c.edge.load,
        cpuVsBare: ISSUE_36.edgeCpuVsBare,
        rssMb36: ISSUE_36.edgeRssMb,
      },
      bare,
    ),
    ...edgeRunFigures(
      `${id}.batch`,
      S,
      {
        name: `batches of ${c.batch.batchSize}`,
        acceptedPerSec: c.batch.reportsPerSec,
        us: batchEdgeUs(c.batch),
        rssMb: c.batch.edgePeakRssMb,
        load: c.batch.load,
        cpuVsBare: ISSUE_36.batchEdgeCpuVsBare,
        rssMb36: ISSUE_36.batchEdgeRssMb,
      },
      bare,
    ),
    ...outside(`${id}.bare`, S, c.bare.cpuCores, c.bare.load, "bare run"),
    ...outside(`${id}.edge`, S, c.edge.cpuCores, c.edge.load, "edge, single"),
    ...outside(`${id}.batch`, S, c.batch.cpuCores, c.batch.load, "edge, batches"),
  ];
}

export function edgeMatrixResults(run: EdgeMatrixRun): EdgeMatrixResults {
  const figures = run.cells.flatMap(cellFigures);
  return { version: 1, ...run, figures, summary: summarize(figures) };
}

export function renderEdgeMatrix(r: EdgeMatrixResults): string {
  const m = r.machine;
  const statuses = r.cells.flatMap((c) =>
    (["edge", "batch"] as const).flatMap((p) => {
      const s = Object.entries(c[p].load.statuses).map(([code, n]) => `${code}: ${n}`);
      if (c[p].load.errors) s.push(`connection errors/timeouts: ${c[p].load.errors}`);
      return s.length
        ? [`- ${c.generator} at ${c.connections}, ${p}, non-200: ${s.join(", ")}`]
        : [];
    }),
  );
  return [
    `# Headroom edge matrix (issue 36's edge rows), ${m.date}`,
    "",
    ...renderRunInfo(r),
    `- One edge, no workers (its backlog dropped after each phase), and a bare Fastify server answering the same POST; the generator (wrk or autocannon, a process of its own), the servers and Redis share the same ${m.cores} cores. CPU is the servers' own (/proc), per request or report.`,
    `- Targets met: **${r.summary.met} of ${r.summary.targets}**`,
    "",
    ...renderFigures(r.figures),
    ...(statuses.length ? ["", ...statuses] : []),
    "",
  ].join("\n");
}
