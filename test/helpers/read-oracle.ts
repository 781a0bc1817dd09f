// What the read API should answer, computed in plain TypeScript from the raw rows of `reports_v`
// (never from the rollups or the latest-limits table the API reads), so that a wrong rollup, a
// wrong aggregate or a wrong filter in the API shows up as a difference.

export interface RawRow {
  provider: string;
  model: string;
  app: string;
  t: number;
  requests_limit: number | null;
  requests_remaining: number | null;
  tokens_limit: number | null;
  tokens_remaining: number | null;
  reset_requests_ms: number | null;
  reset_tokens_ms: number | null;
  credits_limit: number | null;
  credits_remaining: number | null;
  cost: number | null;
  id: string;
}

export const RAW_ROWS_SQL = (db: string) => `SELECT provider, model, app,
    toUnixTimestamp64Milli(timestamp) AS t, requests_limit, requests_remaining, tokens_limit,
    tokens_remaining, reset_requests_ms, reset_tokens_ms, toFloat64(credits_limit) AS credits_limit,
    toFloat64(credits_remaining) AS credits_remaining, toFloat64(request_cost) AS cost,
    toString(report_id) AS id
  FROM ${db}.reports_v WHERE project_id = {project:String}`;

const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));

export function normalise(rows: Record<string, unknown>[]): RawRow[] {
  return rows.map((r) => ({
    provider: String(r.provider),
    model: String(r.model),
    app: String(r.app),
    t: Number(r.t),
    requests_limit: n(r.requests_limit),
    requests_remaining: n(r.requests_remaining),
    tokens_limit: n(r.tokens_limit),
    tokens_remaining: n(r.tokens_remaining),
    reset_requests_ms: n(r.reset_requests_ms),
    reset_tokens_ms: n(r.reset_tokens_ms),
    credits_limit: n(r.credits_limit),
    credits_remaining: n(r.credits_remaining),
    cost: n(r.cost),
    id: String(r.id),
  }));
}

const WINDOW_MS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;
export type OracleWindow = keyof typeof WINDOW_MS;
type Field = "provider" | "model" | "app";

const hasLimits = (r: RawRow) =>
  r.requests_limit !== null ||
  r.requests_remaining !== null ||
  r.tokens_limit !== null ||
  r.tokens_remaining !== null;

const hasCredits = (r: RawRow) =>
  r.credits_limit !== null || r.credits_remaining !== null || r.cost !== null;
/** A provider hint: no requests, tokens or credits figures (README). */
export const isHint = (r: RawRow) => !hasLimits(r) && !hasCredits(r);

const minOf = (xs: (number | null)[]) => {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? Math.min(...v) : null;
};
const maxOf = (xs: (number | null)[]) => {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? Math.max(...v) : null;
};
const pct = (limit: number | null, remaining: number | null) =>
  limit !== null && limit > 0 && remaining !== null
    ? Math.max(0, ((limit - remaining) / limit) * 100)
    : null;
const round2 = (x: number | null) => (x === null ? null : Math.round(x * 100) / 100);

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const it of items) {
    const k = key(it);
    out.set(k, [...(out.get(k) ?? []), it]);
  }
  return out;
}

/** The latest credit balance among rows: that of the newest row carrying one. */
const lastCredits = (rows: RawRow[]) =>
  [...rows].filter((r) => r.credits_remaining !== null).sort((a, b) => b.t - a.t)[0]
    ?.credits_remaining ?? null;

export function usageOracle(
  rows: RawRow[],
  q: { from: number; to: number; window: OracleWindow; groups: Field[] },
) {
  const w = WINDOW_MS[q.window];
  const from = Math.floor(q.from / w) * w;
  const to = Math.ceil(q.to / w) * w;
  const inRange = rows.filter((r) => r.t >= from && r.t < to);
  const bucketOf = (r: RawRow) => Math.floor(r.t / w) * w;
  const groups = groupBy(inRange, (r) =>
    JSON.stringify([...q.groups.map((g) => r[g]), bucketOf(r)]),
  );
  const points = [...groups.values()].map((g) => {
    const first = g[0] as RawRow;
    const series = groupBy(g, (r) => JSON.stringify([r.provider, r.model, r.app]));
    const figures = [...series.values()].map((s) => {
      const rl = maxOf(s.map((r) => r.requests_limit));
      const rr = minOf(s.map((r) => r.requests_remaining));
      const tl = maxOf(s.map((r) => r.tokens_limit));
      const tr = minOf(s.map((r) => r.tokens_remaining));
      return { rl, rr, tl, tr, rPct: pct(rl, rr), tPct: pct(tl, tr) };
    });
    const used = figures.map((f) => maxOf([f.rPct, f.tPct]));
    // A window's remaining and limit come from one series: the one with the highest used %
    // (ties: the highest limit); with no used % anywhere, the lowest remaining, highest limit.
    const worst = (kind: "r" | "t") => {
      const pctOf = (f: (typeof figures)[number]) => (kind === "r" ? f.rPct : f.tPct);
      const limitOf = (f: (typeof figures)[number]) => (kind === "r" ? f.rl : f.tl) ?? 0;
      const ranked = figures
        .filter((f) => pctOf(f) !== null)
        .sort((a, b) => (pctOf(b) ?? 0) - (pctOf(a) ?? 0) || limitOf(b) - limitOf(a));
      const top = ranked[0];
      if (top) return kind === "r" ? [top.rr, top.rl] : [top.tr, top.tl];
      return kind === "r"
        ? [minOf(figures.map((f) => f.rr)), maxOf(figures.map((f) => f.rl))]
        : [minOf(figures.map((f) => f.tr)), maxOf(figures.map((f) => f.tl))];
    };
    const [rrMin, rlMax] = worst("r");
    const [trMin, tlMax] = worst("t");
    // Per dimension, the worst % used among the series' windows: a report without headers has
    // one window per dimension of its six limits fields, and one of its credits.
    const byDimension: Record<string, number> = {};
    const cWorst = maxOf(
      [...series.values()].map((s) =>
        pct(maxOf(s.map((r) => r.credits_limit)), minOf(s.map((r) => r.credits_remaining))),
      ),
    );
    const rWorst = maxOf(figures.map((f) => f.rPct));
    const tWorst = maxOf(figures.map((f) => f.tPct));
    if (cWorst !== null) byDimension.credits = round2(cWorst) as number;
    if (rWorst !== null) byDimension.requests = round2(rWorst) as number;
    if (tWorst !== null) byDimension.tokens = round2(tWorst) as number;
    const point: Record<string, unknown> = { bucket: new Date(bucketOf(first)).toISOString() };
    for (const f of q.groups) point[f] = f === "model" && first.model === "" ? null : first[f];
    return {
      ...point,
      reports: g.length,
      provider_hints: g.filter((r) => isHint(r)).length,
      requests_remaining_min: rrMin,
      tokens_remaining_min: trMin,
      requests_limit_max: rlMax,
      tokens_limit_max: tlMax,
      // The worst of the contract's requests and tokens and of every window (credits too).
      used_pct_max: round2(maxOf([...used, cWorst])),
      cost: g.reduce((s, r) => s + (r.cost ?? 0), 0),
      credits_remaining_last: lastCredits(g),
      used_pct_by_dimension: byDimension,
    };
  });
  const key = (p: Record<string, unknown>) =>
    JSON.stringify([...q.groups.map((f) => p[f] ?? ""), p.bucket]);
  return points.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/**
 * The credits' burn here holds for rows all older than 5 minutes (the burn's history):
 * read-api.now.test.ts checks a burning one.
 */
export function spendOracle(rows: RawRow[], from: number, to: number) {
  const hours = (to - from) / 3_600_000;
  const inRange = rows.filter((r) => r.t >= from && r.t < to);
  return [...groupBy(inRange, (r) => r.provider).entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([provider, g]) => {
      const cost = g.reduce((s, r) => s + (r.cost ?? 0), 0);
      const credits = lastCredits(g);
      return {
        provider,
        cost,
        requests: g.filter((r) => !isHint(r)).length,
        burn_per_hour: Math.round((cost / hours) * 1e6) / 1e6,
        credits_remaining: credits,
        credits_burn_per_hour: null,
        credits_burn_unknown: credits === null ? "no_figures" : "too_few_reports",
        depleted_at: null,
        hours_until_depleted: null,
        hours_until_depleted_unknown: credits === null ? "no_figures" : "too_few_reports",
      };
    });
}

/** Per series: the newest figures (limits and credits apart), and when it was last seen. */
export function latestOracle(rows: RawRow[]) {
  const out = new Map<string, { last: RawRow; lastSeen: number; credits: RawRow | undefined }>();
  for (const [key, g] of groupBy(rows, (r) => JSON.stringify([r.provider, r.model, r.app]))) {
    const newest = [...g].sort((a, b) => b.t - a.t);
    out.set(key, {
      last: newest.find(hasLimits) as RawRow,
      lastSeen: (newest[0] as RawRow).t,
      credits: newest.find(hasCredits),
    });
  }
  return out;
}

export { pct as usedPctOf };

/**
 * The model of "now" (src/alerts/now-model.ts), written apart from it: what one window says at
 * `at`, from the newest figures (`fig`) and the window's raw points (oldest first, ≥ 1 s apart).
 */
export function nowReference(
  metric: "requests" | "tokens" | "credits",
  fig: { limit: number | null; remaining: number | null; t: number | null; resetMs: number | null },
  points: [number, number][],
  at: number,
) {
  const resetsAt = fig.t !== null && fig.resetMs !== null ? fig.t + fig.resetMs : null;
  const reset = resetsAt !== null && at >= resetsAt;
  // The current window: the points after the last rise, of the 5 minutes before the last one,
  // at most 8.
  let start = 0;
  for (let i = 1; i < points.length; i++) {
    if ((points[i] as [number, number])[1] > (points[i - 1] as [number, number])[1]) start = i;
  }
  const last = points.at(-1);
  const history = points
    .slice(start)
    .filter(([t]) => last !== undefined && t >= last[0] - 300_000)
    .slice(-8);
  const first = history[0];
  const perS =
    first && last && last[0] - first[0] >= 1000
      ? (first[1] - last[1]) / ((last[0] - first[0]) / 1000)
      : null;
  const round = (x: number, d: number) => Math.round(x * 10 ** d) / 10 ** d;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  let exhaustedAt: number | null = null;
  let why: string | null = null;
  if (fig.remaining === null || fig.t === null) why = "no_figures";
  else if (reset) why = "reset_since_report";
  else if (fig.remaining <= 0) exhaustedAt = fig.t;
  else if (perS === null) why = "too_few_reports";
  else if (!(perS > 0)) why = "not_burning";
  else {
    exhaustedAt = fig.t + Math.round((fig.remaining / perS) * 1000);
    if (resetsAt !== null && exhaustedAt >= resetsAt) {
      exhaustedAt = null;
      why = "resets_first";
    }
  }
  return {
    limit: fig.limit,
    remaining: fig.remaining,
    used_pct: pct(fig.limit, fig.remaining) === null ? null : round2(pct(fig.limit, fig.remaining)),
    resets_at: iso(resetsAt),
    resets_in_s: resetsAt === null ? null : round(Math.max(0, resetsAt - at) / 1000, 1),
    resets_unknown:
      resetsAt !== null ? null : fig.remaining === null ? "no_figures" : "no_reset_time",
    reset_since_report: reset,
    burn_per_s: perS === null ? null : round(perS, 4),
    burn: perS === null ? null : round(perS * (metric === "credits" ? 3600 : 1), 4),
    burn_unit: { requests: "requests/s", tokens: "tokens/s", credits: "credits/h" }[metric],
    burn_unknown: fig.remaining === null ? "no_figures" : perS === null ? "too_few_reports" : null,
    exhausted_at: iso(exhaustedAt),
    exhaustion_eta_s: exhaustedAt === null ? null : round(Math.max(0, exhaustedAt - at) / 1000, 1),
    exhaustion_unknown: why,
  };
}

/** A series' status at `at` by 70/90 %: windows reset since their report count for nothing. */
export function statusReference(
  windows: { used_pct: number | null; remaining?: number | null; reset_since_report: boolean }[],
  lastSeen: number,
  at: number,
): "ok" | "warning" | "critical" | "stale" {
  if (at - lastSeen > 900_000) return "stale";
  // A window at 0 remaining is used up, its limit known or not.
  const pctOf = (w: (typeof windows)[number]) =>
    w.used_pct ?? (w.remaining != null && w.remaining <= 0 ? 100 : null);
  const used = windows
    .filter((w) => !w.reset_since_report && pctOf(w) !== null)
    .map((w) => pctOf(w) as number);
  const worst = Math.max(0, ...used);
  return worst >= 90 ? "critical" : worst >= 70 ? "warning" : "ok";
}
