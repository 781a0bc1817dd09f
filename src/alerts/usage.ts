import { isResetDelay } from "../lib/time-bounds.js";
import type { DeclaredLimit } from "../providers/declared-limit.js";
import { type Window, WINDOW_LENGTHS, type WindowLength } from "../providers/window.js";
import { poolId, poolKeyOf, poolLabelOf } from "../report/pool-key.js";
import { REPORT_COLUMNS, type ReportColumn, type ReportRow } from "../report/report-schema.js";
import {
  type CountedDimension,
  countedCallOf,
  isCounted,
  type ReportUse,
  type ResetKind,
  resetKindOf,
} from "./counted-windows.js";
import type { LatestWindow } from "./latest-window.js";
import { type DeriveWindows, type RowReading, rememberedReadingOfRow } from "./row-windows.js";
import type { AlertRule, Metric } from "./rule.js";
import { composeWindows } from "./window-figures.js";

// What a rule reads from a stored row (positional, REPORT_COLUMNS order): the series it belongs
// to, and the metric's figures. Rows without the figures (provider hints) give no sample and so
// never change an alert's state.

const at = (c: ReportColumn) => REPORT_COLUMNS.indexOf(c);
const I = {
  id: at("report_id"),
  project: at("project_id"),
  app: at("app"),
  provider: at("provider"),
  model: at("model"),
  timestamp: at("timestamp"),
  receivedAt: at("received_at"),
};

const FIGURES: Record<Metric, { limit: number; remaining: number; reset: number | null }> = {
  requests: {
    limit: at("requests_limit"),
    remaining: at("requests_remaining"),
    reset: at("reset_requests_ms"),
  },
  tokens: {
    limit: at("tokens_limit"),
    remaining: at("tokens_remaining"),
    reset: at("reset_tokens_ms"),
  },
  // Credits are a balance: they do not reset on a provider's schedule.
  credits: { limit: at("credits_limit"), remaining: at("credits_remaining"), reset: null },
};

export interface Sample {
  /**
   * When the edge received the report, Unix ms: the server's clock, never the client's, so that
   * a report dated ahead cannot hold a series' later reports back.
   */
  t: number;
  reportId: string;
  limit: number;
  remaining: number;
  /** % of the limit used: (limit − remaining) / limit. */
  pct: number;
  resetMs: number | null;
  /** The member app that reported it, for a pool's sample (its series names the pool). */
  app?: string;
  /**
   * A counted window's (docs/providers.md): its remaining and % used are what its state's counts
   * make them (evaluate-series.ts), not the placeholders above, which are its limit and 0 %.
   */
  counted?: CountedSample;
  /** A limit a 429 taught for its window (`learned`): its state remembers it for later reports. */
  learned?: LearnedLimit;
}

/** What a counted window's sample carries for the rule's state to count it. */
export interface CountedSample {
  dimension: CountedDimension;
  window: WindowLength | null;
  resets: ResetKind;
  /** The report's timestamp (Unix ms): the counts' time, as the hot copy's. */
  at: number;
  /** What the row counts (counted-windows.ts's countedCallOf); null: it counts nothing. */
  use: ReportUse | null;
  /**
   * Counted only against a limit the window's state learned (a row that states nothing, of a
   * window a 429 may have taught): read only where its state already is, never a new series.
   */
  ifLearned?: true;
}

export interface LearnedLimit {
  limit: number;
  /** The teaching report's timestamp (Unix ms) and id. */
  at: number;
  reportId: string;
  /** Until when it is used up (its retry delay), Unix ms; null: not said. */
  until: number | null;
}

/** The pool a series is, when its reports name one (docs/pools.md): its id and client label. */
export interface SeriesPool {
  /** 12 hex digits, as /api/v1/headroom and the exporter name it. */
  id: string;
  /** The client's label, for a pool by label; null for a pool by account. */
  label: string | null;
}

export interface Series {
  provider: string;
  model: string;
  /** The app; for a pool, the member whose report first showed it in the batch. */
  app: string;
  /** Set when the series is a pool: its state and events are the pool's, not one app's. */
  pool?: SeriesPool;
}

export const projectOf = (row: ReportRow) => String(row[I.project]);

/** The row's client timestamp (ClickHouse DateTime64(3) text, UTC) → Unix ms. */
export const timestampMsOf = (row: ReportRow) =>
  Date.parse(`${String(row[I.timestamp]).replace(" ", "T")}Z`);

/** ClickHouse DateTime64(3) text with seconds under 60: the minute, then what follows it. */
const MINUTE_AND_REST = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:[0-5]\d\.\d{3}$/;

/**
 * timestampMsOf for many rows: a batch's timestamps mostly share their minute, which is parsed
 * once, and the seconds and milliseconds after it are added. Anything else (and hour 24, which
 * Date.parse takes only as 24:00:00.000) goes to timestampMsOf itself.
 */
export function timestampReader(): (row: ReportRow) => number {
  const minutes = new Map<string, number>();
  return (row) => {
    const text = row[I.timestamp];
    if (typeof text !== "string" || !MINUTE_AND_REST.test(text) || text.startsWith("24", 11)) {
      return timestampMsOf(row);
    }
    const minute = text.slice(0, 16);
    let ms = minutes.get(minute);
    if (ms === undefined) {
      if (minutes.size >= 4_096) minutes.clear();
      ms = Date.parse(`${text.slice(0, 10)}T${text.slice(11, 16)}:00.000Z`);
      minutes.set(minute, ms);
    }
    const seconds = (text.charCodeAt(17) - 48) * 10 + text.charCodeAt(18) - 48;
    const millis =
      (text.charCodeAt(20) - 48) * 100 + (text.charCodeAt(21) - 48) * 10 + text.charCodeAt(22) - 48;
    return ms + seconds * 1000 + millis;
  };
}

/** The row's received_at (ClickHouse DateTime64(3) text, UTC) → Unix ms. */
export const receivedMsOf = (row: ReportRow) =>
  Date.parse(`${String(row[I.receivedAt]).replace(" ", "T")}Z`);

export function seriesOf(row: ReportRow): Series {
  return {
    provider: String(row[I.provider]),
    model: row[I.model] === null ? "" : String(row[I.model]),
    app: String(row[I.app]),
  };
}

/**
 * The pool a row draws on, or null (its app alone): ids are remembered by key in `ids`, so that
 * a batch's rows of one pool hash it once.
 */
export function poolOfRow(row: ReportRow, ids?: Map<string, SeriesPool>): SeriesPool | null {
  const key = poolKeyOf(row);
  if (key === "") return null;
  const provider = String(row[I.provider]);
  const model = row[I.model] === null ? "" : String(row[I.model]);
  const cacheKey = `${provider}\u0000${model}\u0000${key}`;
  let pool = ids?.get(cacheKey);
  if (pool === undefined) {
    pool = { id: poolId(provider, model, key), label: poolLabelOf(key) };
    ids?.set(cacheKey, pool);
  }
  return pool;
}

export function matches(rule: AlertRule, row: ReportRow): boolean {
  return (
    row[I.project] === rule.project &&
    (rule.provider === null || row[I.provider] === rule.provider) &&
    (rule.model === null || row[I.model] === rule.model) &&
    (rule.app === null || row[I.app] === rule.app)
  );
}

const num = (v: ReportRow[number] | undefined) =>
  v === null || v === undefined ? null : Number(v);

/**
 * The figures a rule reads, with the % used: a finite limit above zero and a finite remaining
 * (NaN and ±Infinity are none), or null.
 */
function usableFigures(
  limit: number | null,
  remaining: number | null,
): { limit: number; remaining: number; pct: number } | null {
  if (limit === null || remaining === null || !(limit > 0)) return null;
  if (!Number.isFinite(limit) || !Number.isFinite(remaining)) return null;
  const pct = Math.max(0, ((limit - remaining) / limit) * 100);
  return Number.isFinite(pct) ? { limit, remaining, pct } : null;
}

/** A reset delay within the edge's bound (time-bounds.ts); a row stored before it may hold any. */
const resetDelay = (ms: number | null): number | null => (isResetDelay(ms) ? ms : null);

/** The rule's metric in this row, or null when the row does not carry it. */
export function sampleOf(row: ReportRow, metric: Metric): Sample | null {
  const f = FIGURES[metric];
  const limit = num(row[f.limit]);
  const remaining = num(row[f.remaining]);
  const figures = usableFigures(limit, remaining);
  if (figures === null) return null;
  const t = receivedMsOf(row);
  if (!Number.isFinite(t)) return null;
  return {
    t,
    reportId: String(row[I.id]),
    ...figures,
    resetMs: f.reset === null ? null : resetDelay(num(row[f.reset])),
  };
}

/** A rule's sample in one of a row's windows. */
export interface WindowSample extends Sample {
  window: WindowLength | null;
}

/**
 * The rule's samples in this row: one per window of its metric's dimension (only windows of the
 * rule's length when it names one) that carries a limit and a remaining, or that is at 0 remaining
 * (a 429's: used up, whether or not its limit is known: limit 0 in its event). The reset stays
 * relative to the report's timestamp, as the contract's fields are.
 *
 * A rate limit that names no window (report/rate-limit.ts: the pool as a whole) is a sample of
 * the requests of unknown length, used up until its retry delay; a later report of the model
 * that states nothing at all and was not limited is one too, with room again, so the alert it
 * raised resolves.
 */
export function windowSamplesOf(
  row: ReportRow,
  rule: Pick<AlertRule, "metric" | "window">,
  derive?: DeriveWindows,
  /** The project's declared limits that apply to the row's series (declaredFor). */
  declared: readonly DeclaredLimit[] = [],
): WindowSample[] {
  const out: WindowSample[] = [];
  let t: number | undefined;
  const at = timestampMsOf(row);
  // Remembered per row: each rule watching the row asks again.
  const reading = rememberedReadingOfRow(row, derive, at);
  const windows: (Window & { counted?: CountedSample })[] =
    declared.length === 0 ? reading.windows : composedWindows(row, reading, at, declared);
  for (const w of windows) {
    if (w.dimension !== rule.metric) continue;
    if (rule.window != null && w.window !== rule.window) continue;
    const counted = w.counted;
    const figures = counted
      ? { limit: w.limit as number, remaining: w.limit as number, pct: 0 }
      : (usableFigures(w.limit, w.remaining) ?? usedUp(w.limit, w.remaining));
    if (figures === null) continue;
    t ??= receivedMsOf(row);
    if (!Number.isFinite(t)) return [];
    out.push({
      t,
      reportId: String(row[I.id]),
      ...figures,
      resetMs: w.resets_at === null ? null : resetDelay(w.resets_at - at),
      window: w.window,
      ...(counted ? { counted } : {}),
      ...(w.source === "learned" && w.limit !== null && w.limit > 0
        ? { learned: { limit: w.limit, at, reportId: String(row[I.id]), until: w.resets_at } }
        : {}),
    });
  }
  t = learnedWindowSamples(row, rule, reading, at, out, t);
  if (rule.metric !== "requests" || rule.window != null) return out;
  const poolWide =
    reading.pool !== null && !reading.windows.some((w) => w.dimension === "requests");
  // A later report that was not limited and states no requests window of its own (one that does
  // gives its own samples): the pool has room again, as /headroom reads it (its `okAt`).
  const roomAgain =
    !reading.limited &&
    !reading.windows.some((w) => w.dimension === "requests") &&
    row[I.model] !== null;
  if (!poolWide && !roomAgain) return out;
  t ??= receivedMsOf(row);
  if (!Number.isFinite(t)) return [];
  const until = reading.pool?.until ?? null;
  out.push({
    t,
    reportId: String(row[I.id]),
    limit: 0,
    remaining: 0,
    pct: poolWide ? 100 : 0,
    resetMs: poolWide && until !== null ? resetDelay(until - at) : null,
    window: null,
  });
  return out;
}

/** The lengths a counted window may have: those whose reset is known (resetKindOf). */
const COUNTED_LENGTHS = WINDOW_LENGTHS.filter((l) => resetKindOf("", l) !== null);

/**
 * A row that states nothing and was no rate limit is a call a learned limit counts (docs/
 * providers.md): one sample per window of the rule's dimension a 429 may have taught (each
 * countable length, or the rule's), where the row gave none. The window's state says whether a
 * limit was learned (evaluate-series.ts); where none is, nothing is tracked. Returns `t`, read.
 */
function learnedWindowSamples(
  row: ReportRow,
  rule: Pick<AlertRule, "metric" | "window">,
  reading: RowReading,
  at: number,
  out: WindowSample[],
  t: number | undefined,
): number | undefined {
  if (!isCounted(rule.metric)) return t;
  const statesRemaining = reading.windows.some((w) => w.remaining !== null);
  const use = countedCallOf(row, at, {
    limited: reading.limited,
    statesRemaining,
    figures: reading.windows.length > 0,
  });
  if (use === null) return t;
  const provider = String(row[I.provider]);
  for (const length of COUNTED_LENGTHS) {
    if (rule.window != null && rule.window !== length) continue;
    if (out.some((s) => s.window === length)) continue;
    const resets = resetKindOf(provider, length);
    if (resets === null) continue;
    t ??= receivedMsOf(row);
    if (!Number.isFinite(t)) return t;
    out.push({
      t,
      reportId: String(row[I.id]),
      limit: 0,
      remaining: 0,
      pct: 0,
      resetMs: null,
      window: length,
      counted: { dimension: rule.metric, window: length, resets, at, use, ifLearned: true },
    });
  }
  return t;
}

/** A window at 0 remaining or below, its limit unknown (a 429's): used up, 100 %. */
function usedUp(
  limit: number | null,
  remaining: number | null,
): { limit: number; remaining: number; pct: number } | null {
  if (remaining === null || !Number.isFinite(remaining) || remaining > 0) return null;
  return { limit: limit !== null && Number.isFinite(limit) ? limit : 0, remaining, pct: 100 };
}

/**
 * A row's windows as /headroom composes them (window-figures.ts): a limit the provider does not
 * state is the declared one, and a declared window whose remaining no report states is counted.
 * The counts are the rule's state's (evaluate-series.ts): here a counted window is only marked.
 */
function composedWindows(
  row: ReportRow,
  reading: { windows: Window[]; limited: boolean },
  at: number,
  declared: readonly DeclaredLimit[],
): (Window & { counted?: CountedSample })[] {
  const latest: LatestWindow[] = reading.windows.map((w) => ({
    dimension: w.dimension,
    window: w.window,
    ...(w.source ? { source: w.source } : {}),
    limit: w.limit,
    remaining: w.remaining,
    reportedAt: at,
    resetsAt: w.resets_at,
    points: [],
    ...(w.source === "learned" && w.limit !== null
      ? { learned: { limit: w.limit, at, reportId: String(row[I.id]) } }
      : {}),
  }));
  const statesRemaining = reading.windows.some((w) => w.remaining !== null);
  const use = countedCallOf(row, at, {
    limited: reading.limited,
    statesRemaining,
    // A row without a model has no declared limit (declaredFor): this never decides one here.
    figures: reading.windows.length > 0,
  });
  const provider = String(row[I.provider]);
  // Empty counts: composeWindows marks what it would count; the state adds the row's use to its own.
  return composeWindows(latest, { provider, declared, counts: {}, now: at }).map((w) => {
    const base: Window = {
      dimension: w.dimension,
      window: w.window,
      limit: w.limit,
      remaining: w.remaining,
      resets_at: w.resetsAt,
      ...(w.source ? { source: w.source } : {}),
    };
    if (w.source !== "counted" || !w.resets || w.limit === null || !isCounted(w.dimension))
      return base;
    return {
      ...base,
      counted: { dimension: w.dimension, window: w.window, resets: w.resets, at, use },
    };
  });
}
