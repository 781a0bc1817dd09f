// Just enough of the Prometheus text format to read Headroom's own /metrics: the sum of every
// sample of a metric whose labels include the given ones, in all or by one label's value.

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function* samples(text: string, name: string) {
  for (const line of text.split("\n")) {
    const m = SAMPLE.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = new Map<string, string>();
    for (const l of (m[2] ?? "").matchAll(LABEL)) labels.set(l[1] as string, l[2] as string);
    yield { labels, value: Number(m[3]) };
  }
}

export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples(text, name)) {
    if (Object.entries(labels).every(([k, v]) => s.labels.get(k) === v)) sum += s.value;
  }
  return sum;
}

/** Sums by the value of one label, over the samples whose labels include `labels`. */
export function metricByLabel(
  text: string,
  name: string,
  by: string,
  labels: Record<string, string> = {},
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples(text, name)) {
    const key = s.labels.get(by);
    if (key === undefined) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels.get(k) === v)) {
      out[key] = (out[key] ?? 0) + s.value;
    }
  }
  return out;
}

/** GETs a /metrics page (with the metrics token when one is configured); 3 tries. */
export async function scrape(url: string, token?: string): Promise<string> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const res = await fetch(url, {
        headers: token ? { authorization: `Bearer ${token}` } : {},
        signal: AbortSignal.timeout(5_000),
      });
      if (res.ok) return await res.text();
      last = new Error(`status ${res.status}`);
    } catch (err) {
      last = (err as Error).cause ?? err;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`cannot read ${url}: ${(last as Error)?.message ?? String(last)}`);
}
