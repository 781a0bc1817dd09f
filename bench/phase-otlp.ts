import type { Cleanup } from "./cleanup.js";
import { randomBytes } from "node:crypto";
import { OTLP_PATH, otlpTemplateParts, writeOtlpFiles } from "./otlp-bodies.js";
import { type BatchPhase, runBatchPhase } from "./phase-batch.js";
import { metricSum } from "./prometheus.js";
import type { EdgeProc, Stack } from "./stack.js";

// Phase 2c: the edge(s) alone, saturated with OTLP/HTTP protobuf trace exports on POST /v1/traces
// (issue 47): what a provider span costs the edge inside an export, beside phase 2b's report in a
// batch. Run as phase 2b is (runBatchPhase: warm-up, queues paused, the same connections, the
// reports dropped after), with wrk sending exports of SPANS spans whose ids are new in every
// request (otlp-bodies.ts): the normal path. An exporter's retry of the same export is the
// duplicate path, which enqueues nothing; `duplicates` says none of the phase's spans took it.

/** Spans per export. */
export const OTLP_SPANS = 100;
/** Of which provider calls (the rest are ordinary spans). */
export const OTLP_PROVIDER_SPANS = OTLP_SPANS / 2;
/** Distinct exports in the phase's file (each ~44 KB), their ids new in every request. */
const TEMPLATES = 64;

export interface OtlpPhase extends BatchPhase {
  spansPerExport: number;
  /** A request's body, protobuf, uncompressed. */
  bodyBytes: number;
  /** Provider spans the edges answered as already taken, warm-up included (0: the normal path). */
  duplicates: number;
}

const duplicateSpans = async (edges: EdgeProc[]) =>
  (await Promise.all(edges.map((e) => e.metrics()))).reduce(
    (a, t) => a + metricSum(t, "headroom_otlp_spans_total", { outcome: "duplicate" }),
    0,
  );

async function primeEdge(url: string, key: string): Promise<void> {
  const parts = otlpTemplateParts(0, OTLP_SPANS, randomBytes(8), Date.now());
  const res = await fetch(`${url}${OTLP_PATH}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/x-protobuf" },
    body: Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [p] : [randomBytes(8), p]))),
  });
  if (res.status !== 200) throw new Error(`OTLP priming export: ${res.status} ${await res.text()}`);
}

export async function runOtlpPhase(
  stack: Stack,
  edges: EdgeProc[],
  opts: { keys: string[]; durationS: number; warmupS: number },
  cleanup: Cleanup,
): Promise<OtlpPhase> {
  let bodyBytes = 0;
  const files = () => {
    const f = writeOtlpFiles(stack.dir, "otlp", opts.keys, {
      templates: TEMPLATES,
      spans: OTLP_SPANS,
    });
    bodyBytes = f.bodyBytes;
    return f;
  };
  // One export to each edge before the load: a fresh edge defines its id-claim script at the
  // first claim, and concurrent first claims crash it (ioredis#1931, "results[i] is not
  // iterable": src/redis/connections.ts ignores only the token bucket's script for that). A
  // defect of the edge, reported; primed here so that the phase measures the steady state.
  for (const e of edges) await primeEdge(e.url, opts.keys[0] as string);
  const before = await duplicateSpans(edges);
  const phase = await runBatchPhase(
    stack,
    edges,
    {
      keys: opts.keys,
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      // wrk only: it alone sends new ids in every request (wrk-report.lua's OTLP mode).
      generator: "wrk",
      requests: { path: OTLP_PATH, files, reportsEach: OTLP_PROVIDER_SPANS },
    },
    cleanup,
  );
  return {
    ...phase,
    spansPerExport: OTLP_SPANS,
    bodyBytes,
    duplicates: (await duplicateSpans(edges)) - before,
  };
}
