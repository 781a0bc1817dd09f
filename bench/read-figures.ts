import { atMost, type Figure, figure, ISSUE_36, perUnitUs } from "./figure.js";
import type { HeadroomCeiling } from "./headroom-ceiling.js";
import { failedNote } from "./read-answers.js";
import type { FreshnessResult } from "./read-freshness.js";
import type { ReadLoadResult } from "./read-load.js";

// Issue 36's read rows, from one `npm run bench:read`: /api/v1/headroom's CPU per answer ÷ a bare
// route sending the same bytes, and its p99 beside ingest, which the issue bounds for dashboards
// polling open loop on a machine where the API has a core of its own (on 2 shared cores it is
// reported beside the ratio, its target shown). Issue 48's: the p50/p99 of every other endpoint
// the readers polled. A latency over an endpoint with any failed answer is marked invalid.

/**
 * Issue 48's bounds for the page's /usage with 50 dashboards polling; and, on 2 shared cores (the
 * API without a core of its own), /usage's and /headroom's p99 within this many times its p50.
 */
export const ISSUE_48 = { usageP50Ms: 20, usageP99Ms: 100, sharedCoresP99VsP50: 10 };

/** The p99 as a multiple of the p50 (a stall every hundred polls), issue 48's second row. */
const spread = (
  id: string,
  section: string,
  e: { latencyMs: { p50: number; p99: number } } | undefined,
  invalid: string | null,
) =>
  figure(
    `${id}.p99VsP50`,
    section,
    "p99 ÷ p50, the same (the bound where the API has no core of its own)",
    e?.latencyMs.p99,
    "ms",
    {
      targets: [atMost(ISSUE_48.sharedCoresP99VsP50, "ratio")],
      ceiling: { label: "p50", value: e?.latencyMs.p50 ?? 0 },
      // A p50 of 0 makes no ratio (figure.ts would count 0 as met).
      invalid: invalid ?? (e !== undefined && e.latencyMs.p50 > 0 ? null : "no p50"),
    },
  );

const invalidOf = (reads: ReadLoadResult, name: string) => {
  const e = reads.byEndpoint[name];
  return e ? failedNote(e.statuses) : `no answers from ${name}`;
};

/** What each endpoint stands for in the figures' labels. */
const ASKED: Record<string, string> = {
  usage: "/api/v1/usage as the page asks it (last=24h by default, grouped, no window)",
  "alerts-events": "/api/v1/alerts/events as the page asks it",
  spend: "/api/v1/spend as the page asks it",
  reports: "/api/v1/reports as the page asks it (the log's first page)",
  "usage-rolling-minute": "/api/v1/usage?window=minute, rolling 24 h (an API client's poll)",
};

export function readFigures(
  ceiling: HeadroomCeiling,
  /** The readers' run beside ingest; null when only the ceiling was measured (--only headroom). */
  reads: ReadLoadResult | null,
  ingestRate: number,
): Figure[] {
  const S = `issue 36: /api/v1/headroom (${ceiling.bytes} B answer, ${ceiling.encoding})`;
  const ceilingFigures = ceilingRows("read.headroom", S, ceiling, ISSUE_36.headroomCpuVsBare);
  if (reads === null) return ceilingFigures;
  const headroom = reads.byEndpoint.headroom;
  const dashboards = reads.model === "dashboards";
  const readersOf = (n: number) =>
    `${n} ${dashboards ? "dashboards polling (open loop)" : "closed-loop readers"}`;
  const readers = readersOf(reads.readers);
  const others = Object.entries(reads.byEndpoint)
    .filter(([name]) => name !== "headroom")
    .flatMap(([name, e]) => {
      const section = `issue 48: ${ASKED[name] ?? name}`;
      const invalid = invalidOf(reads, name);
      // The issue's bounds are for the page's /usage with dashboards polling.
      const bounded = dashboards && name === "usage";
      const id = `read.${name.replace(/-(.)/g, (_, c: string) => c.toUpperCase())}`;
      return [
        figure(
          `${id}.p50`,
          section,
          `p50, ${readersOf(e.readers)} while ingest runs at ${ingestRate}/s (${e.requests} asked)`,
          e.latencyMs.p50,
          "ms",
          { targets: bounded ? [atMost(ISSUE_48.usageP50Ms)] : [], invalid },
        ),
        figure(`${id}.p99`, section, "p99, the same", e.latencyMs.p99, "ms", {
          targets: bounded ? [atMost(ISSUE_48.usageP99Ms)] : [],
          invalid,
        }),
        ...(bounded ? [spread(id, section, e, invalid)] : []),
      ];
    });
  return [
    ...ceilingFigures,
    figure(
      "read.headroom.p99",
      S,
      `p99, ${readers} while ingest runs at ${ingestRate}/s`,
      headroom?.latencyMs.p99,
      "ms",
      // The issue's bound is for dashboards; a closed loop measures the machine's queue.
      {
        targets: dashboards ? [atMost(ISSUE_36.headroomP99Ms)] : [],
        invalid: invalidOf(reads, "headroom"),
      },
    ),
    figure("read.headroom.p50", S, "p50, the same", headroom?.latencyMs.p50, "ms", {
      invalid: invalidOf(reads, "headroom"),
    }),
    ...(dashboards ? [spread("read.headroom", S, headroom, invalidOf(reads, "headroom"))] : []),
    ...others,
  ];
}

/** Issue 44's advice targets. */
export const ISSUE_44 = {
  /** /api/v1/advice CPU per answer ÷ a bare Fastify GET route sending the same bytes. */
  adviceCpuVsBare: 1.5,
  /** p99 of the advice readers beside ingest, where the API has a core of its own. */
  adviceP99Ms: 5,
  /** From a report's 200 until advice reflects it: p50 and at most. */
  freshnessP50Ms: 1_000,
  freshnessMaxMs: 2_000,
};

/**
 * Issue 44's advice rows: CPU per answer ÷ a bare route sending the same bytes (the headroom
 * ceiling's measurement, on the advice path), the open-loop readers' p50/p99 beside ingest, and
 * how soon an answer reflects a report.
 */
export function adviceFigures(
  ceiling: HeadroomCeiling,
  reads: ReadLoadResult,
  freshness: FreshnessResult,
  rates: { ingest: number; advice: number },
): Figure[] {
  const S = `issue 44: /api/v1/advice (${ceiling.bytes} B answer, ${ceiling.encoding})`;
  const advice = reads.byEndpoint.advice;
  const invalid = invalidOf(reads, "advice");
  const beside = `${reads.readers} clients at ${rates.advice}/s in all (open loop) while ingest runs at ${rates.ingest}/s`;
  return [
    ...ceilingRows("read.advice", S, ceiling, ISSUE_44.adviceCpuVsBare),
    figure(
      "read.advice.answered",
      S,
      `answers per second of the run, ${beside} (late answers count)`,
      advice?.perSec,
      "req/s",
      {
        ceiling: { label: "asked", value: rates.advice },
        invalid,
      },
    ),
    figure("read.advice.p50", S, `p50, ${beside}`, advice?.latencyMs.p50, "ms", { invalid }),
    // The issue's bound is for an API with a core of its own; on 2 shared cores, shown beside.
    figure("read.advice.p99", S, "p99, the same", advice?.latencyMs.p99, "ms", {
      targets: [atMost(ISSUE_44.adviceP99Ms)],
      invalid,
    }),
    figure(
      "read.advice.freshness.p50",
      S,
      `freshness: a report's 200 → advice reflects it, p50 (${freshness.probes} probes)`,
      freshness.latencyMs.p50,
      "ms",
      { targets: [atMost(ISSUE_44.freshnessP50Ms)] },
    ),
    figure("read.advice.freshness.max", S, "freshness, max", freshness.latencyMs.max, "ms", {
      targets: [atMost(ISSUE_44.freshnessMaxMs)],
    }),
    figure(
      "read.advice.freshness.missed",
      S,
      "probes not reflected within 10 s",
      freshness.missed,
      "count",
      {
        targets: [atMost(0)],
      },
    ),
  ];
}

/** A route's ceiling rows: answers a second saturated, and CPU per answer ÷ the bare route's. */
function ceilingRows(id: string, section: string, ceiling: HeadroomCeiling, target: number) {
  const apiUs = perUnitUs(ceiling.api.cpuCores.api, ceiling.api.load.okPerSec, 1);
  const bareUs = perUnitUs(ceiling.bare.cpuCores["bare Fastify"], ceiling.bare.load.okPerSec, 1);
  return [
    figure(
      `${id}.perSec`,
      section,
      "answered, saturated (wrk)",
      ceiling.api.load.okPerSec,
      "req/s",
      {
        ceiling: { label: "bare Fastify, same bytes", value: ceiling.bare.load.okPerSec },
      },
    ),
    figure(
      `${id}.cpuPerAnswer`,
      section,
      "API CPU per answer ÷ bare Fastify sending the same bytes",
      apiUs,
      "µs",
      {
        targets: [atMost(target, "ratio")],
        ceiling: { label: "bare Fastify per answer", value: bareUs },
      },
    ),
  ];
}
