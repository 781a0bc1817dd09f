import {
  type DeclaredLimit,
  declaredFor,
  type ProjectDeclarations,
} from "../providers/declared-limit.js";
import type { WindowLength } from "../providers/window.js";
import type { ReportRow } from "../report/report-schema.js";
import type { AlertEvent } from "./alert-event.js";
import { evaluateSeries, readState } from "./evaluate-series.js";
import type { DeriveWindows } from "./row-windows.js";
import type { AlertRule } from "./rule.js";
import { child, indexRules, type RuleGroup } from "./rule-index.js";
import type { StateStore, StateWrite } from "./state-store.js";
import {
  poolOfRow,
  projectOf,
  type Sample,
  type Series,
  type SeriesPool,
  seriesOf,
  windowSamplesOf,
} from "./usage.js";

// One stored batch against the rules: its rows grouped into series per rule, every series' state
// read in one round trip and written back in one (state-store.ts), retried on a conflict with
// another worker. Returns the batch's events: new ones, or those of an earlier evaluation of the
// same batch that did not finish.
//
// A rule watches each window of its metric's dimension (or only those of its length): state is
// kept per (rule, series, window). A window of unknown length keeps the series' field as it was
// before windows ([provider, model, app]), so the rules' states from before carry on; a window of
// known length adds its length to the field.
//
// A row that draws on a pool (docs/pools.md: its provider named the account, or the client sent
// a label) is a sample of the pool's series, not its app's: every member's rows a rule matches go
// through one state per (rule, pool, window), so one crossing of the pool's limit is one event,
// naming the pool and the member that reported it. A rule filters rows by app as before, so a
// rule on one member app watches the pool that app reports into.
//
// A project's declared limits (docs/providers.md) apply to its rows as /headroom applies them
// (window-figures.ts): a stated remaining gets the declared limit, and a declared window whose
// remaining no report states is counted in the rule's state for that window (evaluate-series.ts).

interface SeriesInput {
  rule: AlertRule;
  field: string;
  series: Series;
  window: WindowLength | null;
  samples: Sample[];
  /** Only counted against a learned limit so far: read where its state is, never tracked anew. */
  peek: { only: boolean };
}

/**
 * How long a batch is known as applied (state-store.ts): a counted sample received longer ago
 * than this, before a series' watermark, is not counted (a redelivery this late could not be told
 * from a first delivery).
 */
export const APPLIED_MS = 48 * 3_600_000;

/**
 * A series' state field for one window. A pool's names the pool where an app's names the app:
 * ["pool", id] is no app's name (an app is a string), so the two never meet.
 */
export function windowField(series: Series, window: WindowLength | null): string {
  const who = series.pool ? ["pool", series.pool.id] : series.app;
  return JSON.stringify(
    window === null
      ? [series.provider, series.model, who]
      : [series.provider, series.model, who, window],
  );
}

const MAX_CONFLICTS = 50;

/**
 * Where a series' evaluation failed: reading its samples from a row, through its state machine,
 * or reading its project's declared limits (its series were evaluated without them).
 */
export const FAILURE_STAGES = ["samples", "evaluate", "declarations"] as const;
export type FailureStage = (typeof FAILURE_STAGES)[number];

/**
 * One series whose evaluation threw: logged and counted by the caller, its state left as it was;
 * every other series of the batch (other tenants' too) is evaluated and its events sent.
 */
export interface SeriesFailure {
  stage: FailureStage;
  rule: AlertRule;
  series: Series;
  error: unknown;
}

/** A new series the store would not track: its rule or project is at its cap. */
export interface RefusedSeries {
  rule: AlertRule;
  series: Series;
}

export function groupSeries(
  rules: AlertRule[],
  rows: ReportRow[],
  derive?: DeriveWindows,
  onFailed: (failure: SeriesFailure) => void = () => {},
  /** Each project's declarations; a project absent has none (or they could not be read). */
  declarations: ReadonlyMap<string, ProjectDeclarations> = new Map(),
): SeriesInput[] {
  // Each row reads the figure of each group of rules matching it once (rule-index.ts), and the
  // rules of a group share one list of samples per series: a row costs the groups that watch it,
  // whatever their number of rules (a new series makes one input per rule, once).
  const index = indexRules(rules);
  const order = new Map(rules.map((r, i) => [r, i]));
  const groupIds = new Map<RuleGroup, number>();
  const shared = new Map<string, { list: Sample[]; peek: { only: boolean } }>();
  const pools = new Map<string, SeriesPool>();
  const inputs: SeriesInput[] = [];
  // A series' declared limits, matched once per batch rather than once per row.
  const matched = new Map<string, DeclaredLimit[]>();
  const declaredOf = (project: string, own: Series, pool: SeriesPool | null) => {
    const all = declarations.get(project);
    if (!all || all.limits.length === 0) return [];
    const label = pool?.label ?? null;
    const key = JSON.stringify([project, own.provider, own.model, label]);
    let mine = matched.get(key);
    if (!mine) {
      mine = declaredFor(all, { provider: own.provider, model: own.model, label });
      matched.set(key, mine);
    }
    return mine;
  };
  for (const row of rows) {
    const groups = index.groupsFor(row);
    if (groups.length === 0) continue;
    const own = seriesOf(row);
    let pool: SeriesPool | null;
    try {
      pool = poolOfRow(row, pools);
    } catch (error) {
      // A row whose pool cannot be read is no one's sample; the batch's other rows go on.
      for (const group of groups)
        for (const rule of group.rules) onFailed({ stage: "samples", rule, series: own, error });
      continue;
    }
    const series: Series = pool ? { ...own, pool } : own;
    const declared = declaredOf(projectOf(row), own, pool);
    // The state's key: the pool's id for a pooled row (a tenant's app never reaches it).
    const who = pool ? `p${pool.id}` : `a${series.app}`;
    for (const group of groups) {
      let samples: ReturnType<typeof windowSamplesOf>;
      try {
        samples = windowSamplesOf(row, group, derive, declared);
      } catch (error) {
        // This row gives this group nothing; the batch's other rows and rules go on.
        for (const rule of group.rules) onFailed({ stage: "samples", rule, series, error });
        continue;
      }
      if (samples.length === 0) continue;
      const id = child(groupIds, group, () => groupIds.size);
      for (const { window, ...sample } of samples) {
        // A cheap key per row; the stored field (JSON) is made once per series and window.
        const key = `${id}\u0000${series.provider}\u0000${series.model}\u0000${who}\u0000${window ?? ""}`;
        let entry = shared.get(key);
        if (!entry) {
          entry = { list: [], peek: { only: true } };
          shared.set(key, entry);
          const field = windowField(series, window);
          for (const rule of group.rules)
            inputs.push({ rule, field, series, window, samples: entry.list, peek: entry.peek });
        }
        if (!sample.counted?.ifLearned) entry.peek.only = false;
        entry.list.push(pool ? { ...sample, app: own.app } : sample);
      }
    }
  }
  // In the rules' order, each rule's series as its rows first showed them (a stable sort).
  return inputs.sort((a, b) => (order.get(a.rule) as number) - (order.get(b.rule) as number));
}

export async function evaluateBatch(
  store: StateStore,
  token: string,
  rules: AlertRule[],
  rows: ReportRow[],
  onRefused: (refused: RefusedSeries[]) => void = () => {},
  derive?: DeriveWindows,
  onFailed: (failure: SeriesFailure) => void = () => {},
  declarations?: ReadonlyMap<string, ProjectDeclarations>,
): Promise<AlertEvent[]> {
  const inputs = groupSeries(rules, rows, derive, onFailed, declarations);
  if (inputs.length === 0) return [];
  const refs = inputs.map((i) => ({
    ruleId: i.rule.id,
    project: i.rule.project,
    field: i.field,
    ...(i.peek.only ? { peek: true } : {}),
  }));
  // A batch with counted samples is marked applied with its states: a redelivery of it is told
  // from a batch evaluated after a later one, whose counted samples before the watermark count.
  const counts = inputs.some((i) => i.samples.some((s) => s.counted));
  for (let attempt = 0; attempt < MAX_CONFLICTS; attempt++) {
    const { outbox, states, refused, removed, applied, now } = await store.read(token, refs);
    if (outbox !== null) return JSON.parse(outbox) as AlertEvent[];
    const late = counts && !applied ? { since: now - APPLIED_MS } : null;
    const events: AlertEvent[] = [];
    const writes: StateWrite[] = [];
    const left: RefusedSeries[] = [];
    const failed: SeriesFailure[] = [];
    // Only a batch whose counted samples changed a state is marked: one key per batch for 48 h
    // otherwise, for every batch of reports that state nothing (most read no state at all).
    let countedWrite = false;
    inputs.forEach((input, i) => {
      // A rule removed since the rules were read: nothing of it is kept or sent.
      if (removed[i]) return;
      if (refused[i]) {
        left.push({ rule: input.rule, series: input.series });
        return;
      }
      const prev = states[i] ?? null;
      // Counted only against a learned limit, and no state: nothing was learned.
      if (prev === null && input.peek.only) return;
      // Each series apart: a throw here (a stored state or a sample no one foresaw) costs this
      // series its evaluation, kept as it was, never the job of every tenant in the batch.
      try {
        const state = prev === null ? null : readState(prev);
        const { next, events: e } = evaluateSeries(
          input.rule,
          input.series,
          input.samples,
          state,
          input.window,
          late,
        );
        const text = JSON.stringify(next);
        if (text !== prev) {
          writes.push({ ...refs[i], prev, next: text } as StateWrite);
          if (input.samples.some((s) => s.counted)) countedWrite = true;
        }
        events.push(...e);
      } catch (error) {
        failed.push({ stage: "evaluate", rule: input.rule, series: input.series, error });
      }
    });
    // Refusals and failures are told once, by the attempt whose outcome stands.
    const done = () => {
      if (left.length > 0) onRefused(left);
      for (const f of failed) onFailed(f);
      return events;
    };
    // Nothing new (every row evaluated before): nothing to write.
    if (writes.length === 0) return done();
    const res = await store.commit(
      token,
      writes,
      events.length > 0 ? JSON.stringify(events) : null,
      late !== null && countedWrite ? APPLIED_MS : null,
    );
    if (res.ok) return done();
    if ("outbox" in res) return JSON.parse(res.outbox) as AlertEvent[];
  }
  throw new Error(`alert state kept changing under batch ${token}: giving up for now`);
}
