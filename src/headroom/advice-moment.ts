import {
  type AdviceAsk,
  type AdvisedPool,
  adviceOf,
  askedOf,
  judgedWindows,
  MAX_ALTERNATIVES,
  poolsAsked,
  usedPct,
} from "./advice.js";

// A project's pool views for advice, made once and judged for many asks (docs/pools.md). What a
// verdict reads of a view — room, a window reset since its report, a pool gone stale, how used
// it is — changes only when a window's reset time passes or a pool's newest report grows stale,
// so the views made at `at` hold, for advice, until the first of those moments. Within that span
// an answer made from them equals one made from fresh views at its own moment (advice.ts's
// `advise`): only retry_after_ms counts from the moment, and it is computed for each answer.
// Burn rates are not read by advice: the views may be made without points. Pools are indexed by
// provider and model, and ranked for alternatives, once. Pure.

/** What deciding "go" for a pool needs, whatever is asked; null: never go (stale, no figures). */
interface Floor {
  /** The least remaining of the requests windows that have not reset (Infinity: none). */
  requests: number;
  tokens: number;
}

export interface AdviceMoment {
  /** When the views were made, Unix ms. */
  at: number;
  /** They hold for advice at any t with at <= t < until and t <= through. */
  until: number;
  through: number;
  /** In /headroom's order (provider, model, first member). */
  pools: AdvisedPool[];
  byModel: Map<string, AdvisedPool[]>;
  /** Every pool with its floor, least used first, then by id: alternatives' order. */
  ranked: { pool: AdvisedPool; floor: Floor | null }[];
}

const HOUR_MS = 3_600_000;

const modelKey = (provider: string, model: string | null) => `${provider}\0${model ?? ""}`;

/** The pool's floor, as judgePool would find it for any ask (advice.ts). */
function floorOf(pool: AdvisedPool): Floor | null {
  if (pool.status === "stale") return null;
  const floor: Floor = { requests: Number.POSITIVE_INFINITY, tokens: Number.POSITIVE_INFINITY };
  let judged = 0;
  for (const w of judgedWindows(pool)) {
    const asked = askedOf(w.dimension);
    if (asked === null) continue;
    if (w.reset_since_report) judged++;
    else if (w.remaining !== null) {
      judged++;
      floor[asked] = Math.min(floor[asked], w.remaining);
    }
  }
  return judged === 0 ? null : floor;
}

/**
 * The views of a project's pools at `now`, each with the newest report of any member
 * (`lastSeen`, what its staleness counts from), in the order advice lists them.
 */
export function adviceMoment(
  views: { view: AdvisedPool; lastSeen: number }[],
  now: number,
  staleAfterMs: number,
): AdviceMoment {
  let until = Number.POSITIVE_INFINITY;
  let through = Number.POSITIVE_INFINITY;
  const byModel = new Map<string, AdvisedPool[]>();
  const ranked: { pool: AdvisedPool; floor: Floor | null; used: number }[] = [];
  for (const { view, lastSeen } of views) {
    // A pool not stale now turns stale once now - lastSeen > staleAfterMs (headroom-view.ts).
    if (view.status !== "stale") through = Math.min(through, lastSeen + staleAfterMs);
    for (const w of [...view.windows, view.requests, view.tokens]) {
      const resetsAt = w.resets_at === null ? Number.NaN : Date.parse(w.resets_at);
      if (resetsAt > now) until = Math.min(until, resetsAt);
      // A rolling counted window (5h, 7d) has no reset: its oldest hour leaves it on the hour.
      if ((w as { resets?: string | null }).resets === "rolling")
        until = Math.min(until, Math.floor(now / HOUR_MS) * HOUR_MS + HOUR_MS);
    }
    const key = modelKey(view.provider, view.model);
    const list = byModel.get(key);
    if (list) list.push(view);
    else byModel.set(key, [view]);
    ranked.push({ pool: view, floor: floorOf(view), used: usedPct(view) });
  }
  ranked.sort((a, b) => a.used - b.used || (a.pool.pool < b.pool.pool ? -1 : 1));
  return {
    at: now,
    until,
    through,
    pools: views.map((v) => v.view),
    byModel,
    ranked: ranked.map(({ pool, floor }) => ({ pool, floor })),
  };
}

/** Whether `m` holds for advice at `t`. */
export const holdsAt = (m: AdviceMoment, t: number) => t >= m.at && t < m.until && t <= m.through;

/** The advice for `ask` at `now` (a moment `m` holds at), as advise() gives it from fresh views. */
export function adviseAt(m: AdviceMoment, ask: AdviceAsk, now: number) {
  const asked = poolsAsked(m.byModel.get(modelKey(ask.provider, ask.model)) ?? [], ask);
  const requests = Math.max(ask.requests, 1);
  const tokens = Math.max(ask.tokens, 1);
  // The same provider first, then the others, each least used first.
  const same: AdvisedPool[] = [];
  const others: AdvisedPool[] = [];
  for (const { pool, floor } of m.ranked) {
    if (floor === null || requests > floor.requests || tokens > floor.tokens) continue;
    if (asked.includes(pool)) continue;
    const list = pool.provider === ask.provider ? same : others;
    if (list.length < MAX_ALTERNATIVES) list.push(pool);
    if (same.length === MAX_ALTERNATIVES) break;
  }
  return adviceOf(asked, [...same, ...others].slice(0, MAX_ALTERNATIVES), ask, now);
}
