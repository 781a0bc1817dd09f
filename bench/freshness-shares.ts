import { metricByLabel, metricSum } from "./prometheus.js";

// Where a report's way to /api/v1/headroom goes, from the workers' own histograms
// (headroom_worker_stage_seconds, src/worker/metrics.ts) scraped before and after a run: every
// job and batch of the run, the probe's among them. A share's p50 is interpolated within its
// bucket, its max is the bucket's upper bound (so "≤"). Batches by what closed them beside.

const STAGES = ["queued", "batched", "inserted", "hot"] as const;
const STAGE = "headroom_worker_stage_seconds";

export interface StageShare {
  /** Observations in the run: jobs (queued, batched) or batches (inserted, hot). */
  count: number;
  p50Ms: number;
  /** The upper bound of the highest bucket that grew. */
  maxAtMostMs: number;
}

export interface FreshnessShares {
  stages: Record<(typeof STAGES)[number], StageShare>;
  /** Of `inserted`: ClickHouse's answer to the insert alone (headroom_worker_insert_seconds). */
  insertOnly: StageShare;
  batchesClosed: Record<string, number>;
  /** ClickHouse's cost driver: rows acknowledged ÷ inserts, over the run. */
  rowsPerInsert: number;
}

/** Cumulative bucket counts of a histogram, summed over the scraped workers, by `le`. */
function buckets(texts: string[], name: string, labels: Record<string, string>) {
  const out = new Map<number, number>();
  for (const text of texts) {
    for (const [le, n] of Object.entries(metricByLabel(text, `${name}_bucket`, "le", labels))) {
      const bound = le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le);
      out.set(bound, (out.get(bound) ?? 0) + n);
    }
  }
  return out;
}

function share(
  before: string[],
  after: string[],
  name: string,
  labels: Record<string, string> = {},
): StageShare {
  const b = buckets(before, name, labels);
  const grew = [...buckets(after, name, labels)]
    .map(([le, n]) => [le, n - (b.get(le) ?? 0)] as const)
    .sort(([x], [y]) => x - y);
  const count = grew.at(-1)?.[1] ?? 0;
  if (count === 0) return { count, p50Ms: 0, maxAtMostMs: 0 };
  let p50Ms = 0;
  let lower = 0;
  let below = 0;
  for (const [le, n] of grew) {
    if (n >= count / 2) {
      const upper = Number.isFinite(le) ? le : lower;
      p50Ms = (lower + ((count / 2 - below) / Math.max(1, n - below)) * (upper - lower)) * 1000;
      break;
    }
    lower = le;
    below = n;
  }
  // The lowest bound that holds every observation.
  const top = grew.find(([, n]) => n === count)?.[0] ?? Number.POSITIVE_INFINITY;
  const round = (v: number) => Math.round(v * 10) / 10;
  return { count, p50Ms: round(p50Ms), maxAtMostMs: round(top * 1000) };
}

export function freshnessShares(before: string[], after: string[]): FreshnessShares {
  const closed = (texts: string[]) => {
    const out: Record<string, number> = {};
    for (const t of texts) {
      for (const [k, v] of Object.entries(
        metricByLabel(t, "headroom_worker_batches_closed_total", "reason"),
      )) {
        out[k] = (out[k] ?? 0) + v;
      }
    }
    return out;
  };
  const was = closed(before);
  const batchesClosed = Object.fromEntries(
    Object.entries(closed(after))
      .map(([k, v]) => [k, v - (was[k] ?? 0)] as const)
      .filter(([, v]) => v > 0),
  );
  const sum = (texts: string[], name: string) => texts.reduce((n, t) => n + metricSum(t, name), 0);
  const rows =
    sum(after, "headroom_worker_rows_inserted_total") -
    sum(before, "headroom_worker_rows_inserted_total");
  const inserts =
    sum(after, "headroom_worker_insert_seconds_count") -
    sum(before, "headroom_worker_insert_seconds_count");
  return {
    rowsPerInsert: inserts > 0 ? Math.round(rows / inserts) : 0,
    insertOnly: share(before, after, "headroom_worker_insert_seconds"),
    stages: Object.fromEntries(
      STAGES.map((stage) => [stage, share(before, after, STAGE, { stage })]),
    ) as Record<(typeof STAGES)[number], StageShare>,
    batchesClosed,
  };
}

/** One line per share, for the bench's log. */
export function describeShares(s: FreshnessShares): string[] {
  const what = {
    queued: "edge's enqueue → worker takes the job (per job)",
    batched: "worker took it → its batch closed (per job)",
    inserted: "batch closed → ClickHouse acknowledged (manifest, insert slot, insert; per batch)",
    hot: "the hot headroom's write (per batch)",
  };
  return [
    ...STAGES.map((k) => {
      const v = s.stages[k];
      return `    ${k}: p50 ${v.p50Ms} ms, max ≤ ${v.maxAtMostMs} ms (${v.count}) — ${what[k]}`;
    }),
    `      of which the insert alone: p50 ${s.insertOnly.p50Ms} ms, max ≤ ${s.insertOnly.maxAtMostMs} ms (${s.insertOnly.count})`,
    `    batches closed by: ${JSON.stringify(s.batchesClosed)}; ${s.rowsPerInsert} rows per insert`,
  ];
}
