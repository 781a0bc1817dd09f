import { type Latency, latencyOf } from "./load-spec.js";

// How fresh /api/v1/headroom is under load: every `intervalMs`, one report with a new
// `requests_remaining` goes through the edge; the time from the edge's 200 until /headroom shows
// that figure is one sample. A report not shown within `giveUpMs` counts as missed.

export interface FreshnessResult {
  probes: number;
  missed: number;
  /** Probe reports the edge refused (not counted as probes). */
  refused: number;
  latencyMs: Latency;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function probeFreshness(opts: {
  edgeUrl: string;
  apiUrl: string;
  reportKey: string;
  readKey: string;
  durationS: number;
  intervalMs?: number;
  giveUpMs?: number;
}): Promise<FreshnessResult> {
  const interval = opts.intervalMs ?? 500;
  const giveUp = opts.giveUpMs ?? 10_000;
  const end = performance.now() + opts.durationS * 1000;
  const samples: number[] = [];
  let missed = 0;
  let refused = 0;
  for (let i = 1; performance.now() < end; i++) {
    const started = performance.now();
    const remaining = 1_000_000 - i;
    const res = await fetch(`${opts.edgeUrl}/api/report`, {
      method: "POST",
      headers: { authorization: `Bearer ${opts.reportKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        provider: "openai",
        model: "freshness-probe",
        app: "freshness-probe",
        limits: {
          requests_limit: 1_000_000,
          requests_remaining: remaining,
          tokens_limit: null,
          tokens_remaining: null,
          reset_requests_ms: 60_000,
          reset_tokens_ms: null,
        },
      }),
    });
    await res.arrayBuffer();
    if (res.status !== 200) {
      // Refused (the edge's per-IP limits are shared with the load's connections): try again.
      refused++;
      await sleep(100);
      continue;
    }
    const accepted = performance.now();
    let shown = false;
    while (performance.now() - accepted < giveUp) {
      const read = await fetch(`${opts.apiUrl}/api/v1/headroom?app=freshness-probe`, {
        headers: { authorization: `Bearer ${opts.readKey}` },
      });
      const body = (await read.json()) as { series?: { requests: { remaining: number } }[] };
      if (body.series?.[0]?.requests.remaining === remaining) {
        samples.push(performance.now() - accepted);
        shown = true;
        break;
      }
      await sleep(20);
    }
    if (!shown) missed++;
    await sleep(Math.max(0, interval - (performance.now() - started)));
  }
  return {
    probes: samples.length + missed,
    missed,
    refused,
    latencyMs: latencyOf(Float64Array.from(samples)),
  };
}
