import type { Figures, Headroom, PoolView, SeriesView } from "./api.js";

// What "Now" draws a card's part and a table's row for. By pool (docs/pools.md): one per pool,
// the apps that draw on one provider limit, with its one figure and its members. By app: one per
// series, for a team that wants to see which app spends a pool. An answer without pools (an API
// before them) is read as one pool of one app per series, which is what such a pool is. No DOM.

export type Grouping = "pool" | "app";

export interface PoolInfo {
  id: string;
  kind: PoolView["kind"];
  label: string | null;
  /** Newest first, as /headroom lists them. */
  members: PoolView["members"];
}

export interface Unit extends Figures {
  /** Stable across polls: what the table's open details are kept by. */
  key: string;
  /** The series' app, or the pool's members' apps, newest first. */
  apps: string[];
  /** By pool: the pool this is. By app: the pool the series shares with other apps, else null. */
  pool: PoolInfo | null;
  /** True when this unit is a pool (by pool), false when it is one app's series. */
  isPool: boolean;
}

const figuresOf = (v: Figures): Figures => ({
  provider: v.provider,
  model: v.model,
  status: v.status,
  last_seen: v.last_seen,
  reported_at: v.reported_at,
  credits_reported_at: v.credits_reported_at,
  requests: v.requests,
  tokens: v.tokens,
  credits: v.credits,
  windows: v.windows,
});

const seriesKey = (s: SeriesView) => JSON.stringify([s.provider, s.model, s.app]);

const infoOf = (p: PoolView): PoolInfo => ({
  id: p.pool,
  kind: p.kind,
  label: p.label,
  members: p.members,
});

/** The units of an answer, grouped as asked. */
export function unitsOf(answer: Headroom, grouping: Grouping): Unit[] {
  const series = answer.series ?? [];
  const pools = answer.pools;
  if (grouping === "pool") {
    if (!pools)
      return series.map((s) => ({
        ...figuresOf(s),
        key: seriesKey(s),
        apps: [s.app],
        pool: {
          id: "",
          kind: "app",
          label: null,
          members: [{ app: s.app, key_id: null, last_seen: s.last_seen }],
        },
        isPool: true,
      }));
    return pools.map((p) => ({
      ...figuresOf(p),
      key: `pool:${p.pool}`,
      apps: p.members.map((m) => m.app),
      pool: infoOf(p),
      isPool: true,
    }));
  }
  // The pool each shared series is in: an app is in one pool per provider and model.
  const shared = new Map<string, PoolInfo>();
  for (const p of pools ?? []) {
    if (p.members.length < 2) continue;
    for (const m of p.members) shared.set(JSON.stringify([p.provider, p.model, m.app]), infoOf(p));
  }
  return series.map((s) => ({
    ...figuresOf(s),
    key: seriesKey(s),
    apps: [s.app],
    pool: shared.get(seriesKey(s)) ?? null,
    isPool: false,
  }));
}

/** "pool openai-prod", "account pool" (the account its provider named), or "app chat". */
export function poolWords(p: PoolInfo): string {
  if (p.kind === "label" && p.label) return `pool ${p.label}`;
  if (p.kind === "account") return "account pool";
  if (p.kind === "app") return `app ${p.members[0]?.app ?? ""}`;
  return `pool ${p.label ?? p.id}`;
}

/** A unit's apps in a line: "chat", or "rag, chat, agent · pool openai-prod" (apps first). */
export function appsWords(u: Unit): string {
  if (!u.isPool || !u.pool || u.pool.kind === "app") return u.apps.join(", ");
  return `${u.apps.join(", ")} · ${poolWords(u.pool)}`;
}

/** "openai · gpt-4o · rag, chat, agent · pool openai-prod". */
export const unitName = (u: Unit) =>
  `${u.provider} · ${u.model ?? "(model not seen)"} · ${appsWords(u)}`;

/** What the counts call the units: "pools" or "series". */
export const noun = (grouping: Grouping, n: number) =>
  grouping === "pool" ? (n === 1 ? "pool" : "pools") : "series";
