import { type Latency, latencyOf } from "./load-spec.js";

// How fresh /api/v1/headroom is under load: every `intervalMs`, one report with a new
// `requests_remaining` goes through the edge; the time from the edge's 200 until /headroom shows
// that figure is one sample. A report not shown within `giveUpMs` counts as missed. `reads:
// "advice"` times /api/v1/advice for the probe's provider, model and app instead (issue 44): its
// requests window's `remaining` is the figure; the probe's app and model are then its own, so
// that two probes of one project run side by side. Beside each sample: how long the edge took to
// answer its report (its group commit is before the 200, so outside the sample) and how long the
// read that showed it took (the API's share; the rest of the poll's share is its 20 ms gap).

export interface FreshnessResult {
  probes: number;
  missed: number;
  /** Probe reports the edge refused (not counted as probes). */
  refused: number;
  latencyMs: Latency;
  /** The probe reports' POST until the edge's 200 (before the sample starts). */
  edgeMs: Latency;
  /** The read that first showed the report, from its request to its answer. */
  apiMs: Latency;
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
  reads?: "headroom" | "advice";
}): Promise<FreshnessResult> {
  const advice = opts.reads === "advice";
  const app = advice ? "advice-probe" : "freshness-probe";
  const readPath = advice
    ? `/api/v1/advice?provider=openai&model=${app}&app=${app}`
    : `/api/v1/headroom?app=${app}`;
  const shows = (body: unknown, remaining: number) =>
    advice
      ? (body as { windows?: { dimension: string; remaining: number | null }[] }).windows?.some(
          (w) => w.dimension === "requests" && w.remaining === remaining,
        ) === true
      : (body as { series?: { requests: { remaining: number } }[] }).series?.[0]?.requests
          .remaining === remaining;
  const interval = opts.intervalMs ?? 500;
  const giveUp = opts.giveUpMs ?? 10_000;
  const end = performance.now() + opts.durationS * 1000;
  const samples: number[] = [];
  const edge: number[] = [];
  const api: number[] = [];
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
        model: app,
        app,
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
    edge.push(accepted - started);
    let shown = false;
    while (performance.now() - accepted < giveUp) {
      const asked = performance.now();
      const read = await fetch(`${opts.apiUrl}${readPath}`, {
        headers: { authorization: `Bearer ${opts.readKey}` },
      });
      if (shows(await read.json(), remaining)) {
        const answered = performance.now();
        samples.push(answered - accepted);
        api.push(answered - asked);
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
    edgeMs: latencyOf(Float64Array.from(edge)),
    apiMs: latencyOf(Float64Array.from(api)),
  };
}
