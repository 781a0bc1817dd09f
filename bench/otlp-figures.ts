import { atMost, type Figure, figure } from "./figure.js";
import { batchEdgeUs } from "./batch-figures.js";
import type { BatchPhase } from "./phase-batch.js";
import type { OtlpPhase } from "./phase-otlp.js";

// Phase 2c's figures and issue 47's target: what a provider span costs the edge inside an OTLP
// export, next to bare Fastify's request and phase 2b's report in a batch (same run, same
// connections).

/** Edge CPU per provider span in an OTLP export ÷ edge CPU per report in a batch of 100. */
export const OTLP_SPAN_VS_BATCH_REPORT = 1.5;

const nonOk = (p: BatchPhase) =>
  Object.values(p.load.statuses).reduce((a, b) => a + b, 0) + p.load.errors;

/** The phase's section, printed after phase 2b's; `cpu` makes its CPU rows. */
export function otlpFigures(
  o: OtlpPhase,
  batch: BatchPhase,
  bareUs: number,
  cpu: (
    id: string,
    section: string,
    cores: Record<string, number>,
    load: OtlpPhase["load"],
  ) => Figure[],
): Figure[] {
  const S = `2c edge alone (no workers), saturated with OTLP protobuf exports of ${o.spansPerExport} spans, ${o.batchSize} of them provider calls (POST /v1/traces)`;
  const spanUs = batchEdgeUs(o);
  return [
    figure("otlp.accepted", S, "provider spans accepted", o.reportsPerSec, "spans/s"),
    figure("otlp.requests", S, "exports answered", o.load.okPerSec, "req/s"),
    figure("otlp.bodyBytes", S, "export body (protobuf, uncompressed)", o.bodyBytes, "B"),
    figure("otlp.p50", S, "latency p50 (per export)", o.load.latencyMs.p50, "ms"),
    figure("otlp.p99", S, "latency p99 (per export)", o.load.latencyMs.p99, "ms"),
    figure("otlp.non200", S, "answers other than 200 (incl. errors)", nonOk(o), "count"),
    // New ids in every request: a duplicate would be the exporter-retry path, which enqueues nothing.
    figure("otlp.duplicates", S, "provider spans answered as duplicates", o.duplicates, "spans", {
      targets: [atMost(0)],
    }),
    figure("otlp.rss", S, "edge peak RSS", o.edgePeakRssMb, "MB"),
    figure("otlp.cpuPerSpan", S, "edge CPU per provider span", spanUs, "µs", {
      ceiling: { label: "bare Fastify per request", value: bareUs },
    }),
    figure(
      "target47.otlpEdgeCpu",
      S,
      `issue 47: edge CPU per provider span ÷ per report in batches of ${batch.batchSize} (2b)`,
      spanUs,
      "µs",
      {
        targets: [atMost(OTLP_SPAN_VS_BATCH_REPORT, "ratio")],
        ceiling: { label: "edge per report in batches (2b)", value: batchEdgeUs(batch) },
      },
    ),
    ...cpu("otlp", S, o.cpuCores, o.load),
  ];
}
