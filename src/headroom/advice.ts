import type { WindowNow } from "../alerts/now-model.js";

// Advice before a provider call (docs/pools.md, GET /api/v1/advice): may the caller spend what
// it asks (`requests`, `tokens`) on a model now? Judged for the moment of the answer from the
// pool's windows as /headroom shows them (pool-view.ts, through the one model of now). Pure.
//
// - go: every window that states a remaining has room for what is asked (a window that reset
//   since its report has room: its figures are the previous window's).
// - wait: a window has not; `retry_after_ms` is the time from the answer to its reset, the
//   longest of the windows without room (the binding one).
// - unknown, with its reason: no report of the model yet, the pool's reports are stale, no
//   window states a remaining, or a window without room states no reset time.

export const VERDICTS = ["go", "wait", "unknown"] as const;
export type Verdict = (typeof VERDICTS)[number];
export const ADVICE_REASONS = ["no_report", "stale", "no_figures", "no_reset_time"] as const;
export type AdviceReason = (typeof ADVICE_REASONS)[number];

/** What a pool view (queries/headroom.ts, poolView) gives advice. */
export interface AdvisedPool {
  pool: string;
  kind: string;
  label: string | null;
  provider: string;
  model: string | null;
  status: string;
  members: { app: string }[];
  windows: (WindowNow & { dimension: string; window: string | null })[];
  requests: WindowNow;
  tokens: WindowNow;
}

export interface AdviceAsk {
  provider: string;
  model: string;
  app?: string;
  pool?: string;
  requests: number;
  tokens: number;
}

export interface JudgedWindow {
  dimension: string;
  window: string | null;
  limit: number | null;
  remaining: number | null;
  resets_at: string | null;
  reset_since_report: boolean;
  /** What this window is asked for (requests or tokens). */
  needed: number;
  /** Whether it has room for it; null when it cannot tell (no remaining) or is not asked. */
  room: boolean | null;
}

export interface Judgement {
  verdict: Verdict;
  reason: AdviceReason | null;
  retry_after_ms: number | null;
  binding: JudgedWindow | null;
  windows: JudgedWindow[];
}

/** What a window of `dimension` counts of an ask: requests, tokens, or nothing (credits). */
export function askedOf(dimension: string): "requests" | "tokens" | null {
  if (dimension === "requests") return "requests";
  if (dimension === "tokens" || dimension.endsWith("_tokens")) return "tokens";
  return null;
}

/**
 * What a window of `dimension` is asked for: requests count requests, token windows tokens (a
 * call spends one of each at least); other dimensions (credits) are not judged.
 */
function neededBy(dimension: string, ask: Pick<AdviceAsk, "requests" | "tokens">): number {
  const asked = askedOf(dimension);
  return asked === null ? 0 : Math.max(ask[asked], 1);
}

/** The windows a pool is judged by: its windows, or for a copy kept before windows, its metrics. */
export const judgedWindows = (pool: AdvisedPool) =>
  pool.windows.length > 0
    ? pool.windows
    : [
        { ...pool.requests, dimension: "requests", window: null },
        { ...pool.tokens, dimension: "tokens", window: null },
      ];

/** A pool's windows (or, for a copy kept before windows, its requests and tokens) judged. */
export function judgePool(
  pool: AdvisedPool,
  ask: Pick<AdviceAsk, "requests" | "tokens">,
  now: number,
): Judgement {
  const windows: JudgedWindow[] = [];
  for (const w of judgedWindows(pool)) {
    const needed = neededBy(w.dimension, ask);
    // A window of another dimension is not judged; one reset since its report has room.
    const room =
      needed === 0
        ? null
        : w.reset_since_report
          ? true
          : w.remaining === null
            ? null
            : w.remaining >= needed;
    windows.push({
      dimension: w.dimension,
      window: w.window,
      limit: w.limit,
      remaining: w.remaining,
      resets_at: w.resets_at,
      reset_since_report: w.reset_since_report,
      needed,
      room,
    });
  }
  if (pool.status === "stale")
    return { verdict: "unknown", reason: "stale", retry_after_ms: null, binding: null, windows };
  const judged = windows.filter((w) => w.room !== null);
  if (judged.length === 0)
    return {
      verdict: "unknown",
      reason: "no_figures",
      retry_after_ms: null,
      binding: null,
      windows,
    };
  const short = judged.filter((w) => w.room === false);
  if (short.length === 0)
    return { verdict: "go", reason: null, retry_after_ms: null, binding: null, windows };
  let binding: JudgedWindow | null = null;
  let wait = -1;
  for (const w of short) {
    if (w.resets_at === null)
      return {
        verdict: "unknown",
        reason: "no_reset_time",
        retry_after_ms: null,
        binding: w,
        windows,
      };
    const ms = Math.max(0, Date.parse(w.resets_at) - now);
    if (ms > wait) {
      wait = ms;
      binding = w;
    }
  }
  return { verdict: "wait", reason: null, retry_after_ms: wait, binding, windows };
}

/** The most used % of a pool's judged windows (0 when none states one). */
export const usedPct = (pool: AdvisedPool) =>
  Math.max(
    0,
    ...(pool.windows.length > 0 ? pool.windows : [pool.requests, pool.tokens])
      .filter((w) => !w.reset_since_report)
      .map((w) => w.used_pct ?? 0),
  );

/** The pools an ask names: its provider and model, and its pool (id or label) or app. */
export function poolsAsked(pools: AdvisedPool[], ask: AdviceAsk): AdvisedPool[] {
  return pools.filter(
    (p) =>
      p.provider === ask.provider &&
      (p.model ?? "") === ask.model &&
      (ask.pool === undefined || p.pool === ask.pool || p.label === ask.pool) &&
      (ask.app === undefined || p.members.some((m) => m.app === ask.app)),
  );
}

/** The most alternatives an answer lists. */
export const MAX_ALTERNATIVES = 5;

/**
 * The advice: the pool judged (of several that match, the one that holds the caller back the
 * longest: wait over unknown over go), and the project's other pools with room now, the same
 * provider first, then the least used.
 */
export function advise(pools: AdvisedPool[], ask: AdviceAsk, now: number) {
  const asked = poolsAsked(pools, ask);
  const alternatives = pools
    .filter((p) => !asked.includes(p) && judgePool(p, ask, now).verdict === "go")
    .map((p) => ({ p, same: p.provider === ask.provider ? 0 : 1, used: usedPct(p) }))
    .sort((a, b) => a.same - b.same || a.used - b.used || (a.p.pool < b.p.pool ? -1 : 1))
    .slice(0, MAX_ALTERNATIVES)
    .map(({ p }) => p);
  return adviceOf(asked, alternatives, ask, now);
}

export type Advice = ReturnType<typeof adviceOf>;

/** The answer from the pools asked and the alternatives chosen (best first). */
export function adviceOf(
  asked: AdvisedPool[],
  alternatives: AdvisedPool[],
  ask: AdviceAsk,
  now: number,
) {
  const rank = (j: Judgement) =>
    j.verdict === "wait" ? 2e15 + (j.retry_after_ms ?? 0) : j.verdict === "unknown" ? 1e15 : 0;
  let pool: AdvisedPool | null = null;
  let judgement: Judgement = {
    verdict: "unknown",
    reason: "no_report",
    retry_after_ms: null,
    binding: null,
    windows: [],
  };
  for (const p of asked) {
    const j = judgePool(p, ask, now);
    if (pool === null || rank(j) > rank(judgement)) {
      pool = p;
      judgement = j;
    }
  }
  return {
    ...judgement,
    pool:
      pool === null
        ? null
        : {
            pool: pool.pool,
            kind: pool.kind,
            label: pool.label,
            members: pool.members.map((m) => m.app),
          },
    alternatives: alternatives.map((p) => ({
      provider: p.provider,
      model: p.model,
      pool: p.pool,
      label: p.label,
      used_pct: usedPct(p),
    })),
  };
}
