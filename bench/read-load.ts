import { type Latency, latencyOf } from "./load-spec.js";

// Readers of the read API: `readers` closed loops (each sends its next request when the last is
// answered), each alternating between the endpoints and going round the keys, for `durationS`.
// Latency per endpoint, from sending to the end of the body.

export interface ReadTarget {
  name: string;
  path: string;
}

export interface ReadLoadResult {
  readers: number;
  durationS: number;
  requests: number;
  byEndpoint: Record<
    string,
    { requests: number; perSec: number; statuses: Record<string, number>; latencyMs: Latency }
  >;
}

export async function runReaders(opts: {
  url: string;
  keys: string[];
  targets: ReadTarget[];
  readers: number;
  durationS: number;
}): Promise<ReadLoadResult> {
  const latencies = new Map<string, number[]>(opts.targets.map((t) => [t.name, []]));
  const statuses = new Map<string, Record<string, number>>(opts.targets.map((t) => [t.name, {}]));
  const end = performance.now() + opts.durationS * 1000;
  let requests = 0;

  async function reader(r: number) {
    for (let i = r; performance.now() < end; i++) {
      const target = opts.targets[i % opts.targets.length] as ReadTarget;
      const key = opts.keys[(i * 7 + r) % opts.keys.length] as string;
      const t0 = performance.now();
      let status = "error";
      try {
        const res = await fetch(`${opts.url}${target.path}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        await res.arrayBuffer();
        status = String(res.status);
      } catch {
        // counted as "error"
      }
      latencies.get(target.name)?.push(performance.now() - t0);
      const s = statuses.get(target.name) as Record<string, number>;
      s[status] = (s[status] ?? 0) + 1;
      requests++;
    }
  }
  await Promise.all(Array.from({ length: opts.readers }, (_, r) => reader(r)));

  return {
    readers: opts.readers,
    durationS: opts.durationS,
    requests,
    byEndpoint: Object.fromEntries(
      opts.targets.map((t) => {
        const values = latencies.get(t.name) ?? [];
        return [
          t.name,
          {
            requests: values.length,
            perSec: Math.round(values.length / opts.durationS),
            statuses: statuses.get(t.name) ?? {},
            latencyMs: latencyOf(Float64Array.from(values)),
          },
        ];
      }),
    ),
  };
}
