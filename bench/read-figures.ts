import { atMost, type Figure, figure, ISSUE_36, perUnitUs } from "./figure.js";
import type { HeadroomCeiling } from "./headroom-ceiling.js";
import type { ReadLoadResult } from "./read-load.js";

// Issue 36's read rows, from one `npm run bench:read`: /api/v1/headroom's CPU per answer ÷ a bare
// route sending the same bytes, and its p99 beside ingest, which the issue bounds for dashboards
// polling open loop on a machine where the API has a core of its own (on 2 shared cores it is
// reported beside the ratio, its target shown).

export function readFigures(
  ceiling: HeadroomCeiling,
  reads: ReadLoadResult,
  ingestRate: number,
): Figure[] {
  const S = `issue 36: /api/v1/headroom (${ceiling.bytes} B answer, ${ceiling.encoding})`;
  const apiUs = perUnitUs(ceiling.api.cpuCores.api, ceiling.api.load.okPerSec, 1);
  const bareUs = perUnitUs(ceiling.bare.cpuCores["bare Fastify"], ceiling.bare.load.okPerSec, 1);
  const headroom = reads.byEndpoint.headroom;
  const dashboards = reads.model === "dashboards";
  return [
    figure(
      "read.headroom.perSec",
      S,
      "answered, saturated (wrk)",
      ceiling.api.load.okPerSec,
      "req/s",
      {
        ceiling: { label: "bare Fastify, same bytes", value: ceiling.bare.load.okPerSec },
      },
    ),
    figure(
      "read.headroom.cpuPerAnswer",
      S,
      "API CPU per answer ÷ bare Fastify sending the same bytes",
      apiUs,
      "µs",
      {
        targets: [atMost(ISSUE_36.headroomCpuVsBare, "ratio")],
        ceiling: { label: "bare Fastify per answer", value: bareUs },
      },
    ),
    figure(
      "read.headroom.p99",
      S,
      `p99, ${reads.readers} ${dashboards ? "dashboards polling (open loop)" : "closed-loop readers"} while ingest runs at ${ingestRate}/s`,
      headroom?.latencyMs.p99,
      "ms",
      // The issue's bound is for dashboards; a closed loop measures the machine's queue.
      { targets: dashboards ? [atMost(ISSUE_36.headroomP99Ms)] : [] },
    ),
    figure("read.headroom.p50", S, "p50, the same", headroom?.latencyMs.p50, "ms"),
  ];
}
