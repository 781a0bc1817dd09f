import type { Metric } from "../alerts/rule.js";
import { poolId } from "../report/pool-key.js";
import { addCounts } from "../alerts/counted-windows.js";
import {
  type HotSeries,
  type HotWindow,
  MAX_WINDOWS_PER_SERIES,
  seriesField,
  thinPoints,
} from "./hot-series.js";
import { HOT_POINTS } from "./hot-merge.js";

// Pools (docs/pools.md): the series of a project that draw on one provider limit, and the one
// figure of each of their windows. A series (provider, model, app) is in the pool of its newest
// report (HotSeries.g): the account its provider named, else its label, else its app alone (no
// merging on a guess). A pool's figures are those of the newest report of any member, per window
// (and per legacy metric); its points are all members' points together, so that its burn rate is
// what every member spends. Each member's series already holds its own newest per window, so the
// newest among members is the newest among all their reports, in whatever order they arrived.
// Pure.

export const POOL_KINDS = ["account", "label", "app"] as const;
export type PoolKind = (typeof POOL_KINDS)[number];

export interface PoolMember {
  app: string;
  /** The key id of the member's newest report (null: a copy kept before pools). */
  keyId: string | null;
  lastSeen: number;
}

export interface PoolGroup {
  /** A short id, the same for the same pool, that reveals nothing of the account. */
  id: string;
  kind: PoolKind;
  /** The client's label, for a label pool; else null. */
  label: string | null;
  provider: string;
  model: string;
  /** Apps, newest first. */
  members: PoolMember[];
  /** The pool's figures and points, as one series (its `g` is unset). */
  series: HotSeries;
  /** A series field naming the pool's first member (for hotFigures). */
  field: string;
}

export { poolId };

const newer = (t: number, id: string, t0: number | undefined, id0: string | undefined) =>
  t0 === undefined || t > t0 || (t === t0 && id > (id0 ?? ""));

/** Points of several members as one list: by time (then text), thinned, the newest kept. */
function unionPoints(lists: ([number, string][] | undefined)[]): [number, string][] | undefined {
  const all: [number, string][] = [];
  for (const l of lists) if (Array.isArray(l)) all.push(...l);
  if (all.length === 0) return undefined;
  all.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const out: [number, string][] = [];
  for (const p of all) {
    const last = out[out.length - 1];
    if (!last || last[0] !== p[0] || last[1] !== p[1]) out.push(p);
  }
  // Several members' points: the pool keeps as many as a series does for each of them, at most.
  return thinPoints(out).slice(-HOT_POINTS * lists.length);
}

/** Members' series → the pool's: the newest figures of each window and metric, all the points. */
export function mergeSeries(members: HotSeries[]): HotSeries {
  const out: HotSeries = { ls: 0, p: {} };
  for (const s of members) {
    out.ls = Math.max(out.ls, s.ls);
    if (s.la !== undefined && newer(s.la, s.li ?? "", out.la, out.li)) {
      out.la = s.la;
      out.li = s.li ?? "";
      if (s.l) out.l = s.l;
    }
    if (s.ca !== undefined && newer(s.ca, s.ci ?? "", out.ca, out.ci)) {
      out.ca = s.ca;
      out.ci = s.ci ?? "";
      if (s.c) out.c = s.c;
    }
    if (Array.isArray(s.x) && (!out.x || newer(s.x[0], s.x[1], out.x[0], out.x[1]))) out.x = s.x;
    if (typeof s.o === "number") out.o = Math.max(out.o ?? s.o, s.o);
    // Members are apps of their own: their counted reports add up.
    if (s.k && typeof s.k === "object") out.k = addCounts(out.k ?? {}, s.k);
    for (const [key, fig] of Object.entries(s.lw ?? {})) {
      if (!Array.isArray(fig)) continue;
      out.lw ??= {};
      const kept = out.lw[key];
      if (
        kept
          ? !newer(fig[0], fig[1], kept[0], kept[1])
          : Object.keys(out.lw).length >= MAX_WINDOWS_PER_SERIES
      )
        continue;
      out.lw[key] = fig;
    }
    for (const [key, fig] of Object.entries(s.w ?? {})) {
      if (!Array.isArray(fig)) continue;
      out.w ??= {};
      const kept = out.w[key];
      if (kept ? newer(fig[0], fig[1], kept[0], kept[1]) : true) {
        if (!kept && Object.keys(out.w).length >= MAX_WINDOWS_PER_SERIES) continue;
        out.w[key] = fig as HotWindow;
      }
    }
  }
  for (const m of ["requests", "tokens", "credits"] as Metric[]) {
    const p = unionPoints(members.map((s) => s.p?.[m]));
    if (p) out.p[m] = p;
  }
  for (const key of Object.keys(out.w ?? {})) {
    const p = unionPoints(members.map((s) => s.wp?.[key]));
    if (!p) continue;
    out.wp ??= {};
    out.wp[key] = p;
  }
  return out;
}

export interface Placed {
  kind: PoolKind;
  key: string;
  label: string | null;
}

/** Where a series is placed: its newest report's pool key, else its app alone ("app:" and the app). */
export function placeOf(app: string, s: HotSeries): Placed {
  const key = Array.isArray(s.g) ? String(s.g[2] ?? "") : "";
  if (key.startsWith("a:")) return { kind: "account", key, label: null };
  if (key.startsWith("l:")) return { kind: "label", key, label: key.slice(2) };
  return { kind: "app", key: `app:${app}`, label: null };
}

/** A project's series → its pools, in the series' order of first appearance. */
export function poolsOf(series: Iterable<[string, HotSeries]>): PoolGroup[] {
  const groups = new Map<
    string,
    { placed: Placed; provider: string; model: string; list: [string, HotSeries][] }
  >();
  for (const [field, s] of series) {
    const [provider, model, app] = JSON.parse(field) as [string, string, string];
    const placed = placeOf(app, s);
    const gk = JSON.stringify([provider, model, placed.key]);
    let g = groups.get(gk);
    if (!g) {
      g = { placed, provider, model, list: [] };
      groups.set(gk, g);
    }
    g.list.push([field, s]);
  }
  const out: PoolGroup[] = [];
  for (const { placed, provider, model, list } of groups.values()) {
    const members = list
      .map(([field, s]): PoolMember => {
        const [, , app] = JSON.parse(field) as [string, string, string];
        return {
          app,
          keyId: Array.isArray(s.g) ? String(s.g[3] ?? "") || null : null,
          lastSeen: s.ls,
        };
      })
      .sort((a, b) => b.lastSeen - a.lastSeen || (a.app < b.app ? -1 : a.app > b.app ? 1 : 0));
    out.push({
      id: poolId(provider, model, placed.key),
      kind: placed.kind,
      label: placed.label,
      provider,
      model,
      members,
      series:
        list.length === 1
          ? (list[0] as [string, HotSeries])[1]
          : mergeSeries(list.map(([, s]) => s)),
      field: seriesField({ provider, model, app: (members[0] as PoolMember).app }),
    });
  }
  return out;
}
