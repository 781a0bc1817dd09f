import {
  type DeclarationsReader,
  type DeclaredLimit,
  declaredFor,
  type ProjectDeclarations,
} from "../providers/declared-limit.js";
import type { ReportRow } from "../report/report-schema.js";
import { EVAL_JOB, type EvalQueue, evalJobId } from "./queues.js";
import type { DeriveWindows } from "./row-windows.js";
import type { AlertRule } from "./rule.js";
import type { RuleCache } from "./rule-cache.js";
import { indexRules, type RuleGroup } from "./rule-index.js";
import { poolOfRow, projectOf, seriesOf, windowSamplesOf } from "./usage.js";

// The ingest worker's part: once a batch is stored, the rows some rule watches go to the
// `alerts` queue as one job, under an id derived from the batch's manifest token. The rules come
// from a short-lived cache, so a batch of projects without rules costs no Redis call at all
// within the cache's TTL, and a batch with watched rows costs a count and one `add`.
//
// The queue is bounded: with the alerts worker down it would otherwise grow until Redis's memory
// gate closes intake for every tenant. Beyond `maxJobs` a batch's alert rows are shed (counted,
// never evaluated): alerts fall behind, ingest goes on.

/** A batch as ClickHouse stored it: its manifest's token (its identity) and its rows. */
export interface StoredBatch {
  token: string;
  rows: ReportRow[];
}

export interface AlertsHookDeps {
  rules: RuleCache;
  queue: EvalQueue;
  /** Jobs the alerts queue may hold (waiting, delayed or active) before batches are shed. */
  maxJobs: number;
  /** A batch's watched rows were shed: the queue was full. */
  onShed?: (rows: number) => void;
  /** How a row's windows are derived (a watched row carries a window of a rule's dimension). */
  deriveWindows?: DeriveWindows;
  /**
   * Projects' declared limits: a row that states nothing is watched when a declared limit makes
   * it a counted window's (docs/providers.md). Unreadable: the row is judged on what it states.
   */
  declarations?: DeclarationsReader;
}

export function createAlertsHook(deps: AlertsHookDeps) {
  return async function onStored(manifest: StoredBatch): Promise<void> {
    const projects = new Set<string>();
    for (const row of manifest.rows) projects.add(projectOf(row));
    const byProject = await deps.rules.rulesFor(projects);
    // Most batches belong to projects without rules: no row needs a look.
    if (![...byProject.values()].some((rules) => rules.length > 0)) return;

    const declarations = new Map<string, ProjectDeclarations>();
    const reader = deps.declarations;
    if (reader) {
      await Promise.all(
        [...byProject].map(async ([project, rules]) => {
          if (rules.length === 0) return;
          // Unreadable: the alerts worker reads them again, and counts it if it fails too.
          const d = await reader.forProject(project).catch(() => null);
          if (d && d.limits.length > 0) declarations.set(project, d);
        }),
      );
    }
    const declaredOf = (row: ReportRow): DeclaredLimit[] => {
      const d = declarations.get(projectOf(row));
      if (!d) return [];
      let label: string | null = null;
      try {
        label = poolOfRow(row)?.label ?? null;
      } catch {
        // A pool that cannot be read: the alerts worker counts it; its model's limits still apply.
      }
      return declaredFor(d, { ...seriesOf(row), label });
    };
    // A row costs the rules that match it (rule-index.ts), never every rule of its project.
    const index = indexRules([...byProject.values()].flat());
    const used = new Set<RuleGroup>();
    const rows: ReportRow[] = [];
    for (const row of manifest.rows) {
      let watched = false;
      const groups = index.groupsFor(row);
      const declared = groups.length > 0 ? declaredOf(row) : [];
      for (const group of groups) {
        if (used.has(group) && watched) continue;
        if (windowSamplesOf(row, group, deps.deriveWindows, declared).length > 0) {
          used.add(group);
          watched = true;
        }
      }
      if (watched) rows.push(row);
    }
    if (rows.length === 0) return;
    const rules: AlertRule[] = [...used].flatMap((g) => g.rules);
    const counts = await deps.queue.getJobCounts("wait", "prioritized", "delayed", "active");
    if (Object.values(counts).reduce((a, b) => a + b, 0) >= deps.maxJobs) {
      deps.onShed?.(rows.length);
      return;
    }
    await deps.queue.add(
      EVAL_JOB,
      { v: 1, token: manifest.token, rules, rows },
      { jobId: evalJobId(manifest.token) },
    );
  };
}
