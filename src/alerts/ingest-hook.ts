import type { ReportRow } from "../report/report-schema.js";
import { EVAL_JOB, type EvalQueue, evalJobId } from "./queues.js";
import type { DeriveWindows } from "./row-windows.js";
import type { AlertRule } from "./rule.js";
import type { RuleCache } from "./rule-cache.js";
import { indexRules, type RuleGroup } from "./rule-index.js";
import { projectOf, windowSamplesOf } from "./usage.js";

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
}

export function createAlertsHook(deps: AlertsHookDeps) {
  return async function onStored(manifest: StoredBatch): Promise<void> {
    const projects = new Set<string>();
    for (const row of manifest.rows) projects.add(projectOf(row));
    const byProject = await deps.rules.rulesFor(projects);
    // Most batches belong to projects without rules: no row needs a look.
    if (![...byProject.values()].some((rules) => rules.length > 0)) return;

    // A row costs the rules that match it (rule-index.ts), never every rule of its project.
    const index = indexRules([...byProject.values()].flat());
    const used = new Set<RuleGroup>();
    const rows: ReportRow[] = [];
    for (const row of manifest.rows) {
      let watched = false;
      for (const group of index.groupsFor(row)) {
        if (used.has(group) && watched) continue;
        if (windowSamplesOf(row, group, deps.deriveWindows).length > 0) {
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
