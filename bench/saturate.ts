import autocannon from "autocannon";
import { type LoadResult, type LoadSpec, REPORT_PATH } from "./load-spec.js";
import type { BodySource } from "./report-bodies.js";

// Closed-loop saturation with autocannon: every connection sends its next report as soon as the
// previous one is answered, so the rate found is the most the target answers.

export async function saturate(spec: LoadSpec, bodies: BodySource): Promise<LoadResult> {
  let n = 0;
  const result = await autocannon({
    url: spec.url,
    connections: spec.connections,
    pipelining: 1,
    duration: spec.durationS,
    timeout: 10,
    requests: [
      {
        method: "POST",
        path: REPORT_PATH,
        setupRequest: (req) => {
          const i = n++;
          return {
            ...req,
            headers: {
              "content-type": "application/json",
              authorization: `Bearer ${spec.keys[i % spec.keys.length]}`,
            },
            body: bodies.body(i),
          };
        },
      },
    ],
  });
  const statuses: Record<string, number> = {};
  let ok = 0;
  for (const [status, { count = 0 }] of Object.entries(result.statusCodeStats ?? {})) {
    if (status === "200") ok = count;
    else statuses[status] = count;
  }
  const l = result.latency;
  return {
    mode: "saturate",
    durationS: result.duration,
    startedAt: new Date(result.start).getTime(),
    sent: result.requests.sent,
    ok,
    okPerSec: Math.round(ok / result.duration),
    statuses,
    errors: result.errors,
    latencyMs: { p50: l.p50, p90: l.p90, p99: l.p99, max: l.max, mean: l.mean },
    unsent: 0,
    generatorCores: 0,
  };
}
