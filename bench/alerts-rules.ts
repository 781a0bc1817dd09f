import { performance } from "node:perf_hooks";
import { sampleRow } from "../fixtures/sample-reports.js";
import { groupSeries } from "../src/alerts/evaluate-batch.js";
import { createAlertsHook } from "../src/alerts/ingest-hook.js";
import type { EvalJobData, EvalQueue } from "../src/alerts/queues.js";
import type { AlertRule } from "../src/alerts/rule.js";
import type { RuleCache } from "../src/alerts/rule-cache.js";
import type { ReportRow } from "../src/report/report-schema.js";

// What one project's many alert rules cost a batch shared with other projects: the ingest
// worker's selection of watched rows (createAlertsHook) and the alerts worker's grouping of rows
// into series (groupSeries), in process, without Redis. One project ("big") has RULES rules, each
// on an app none of its rows carry (they watch nothing: the cost is the look), or, with
// MATCHING=1, none filtered (each watches every row of the project); 19 others have one rule each.
//   npx tsx bench/alerts-rules.ts            # RULES=1000 ROWS=5000 RUNS=20 MATCHING=0
const RULES = Number(process.env.RULES ?? 1_000);
const ROWS = Number(process.env.ROWS ?? 5_000);
const RUNS = Number(process.env.RUNS ?? 20);
const MATCHING = process.env.MATCHING === "1";
const PROJECTS = 20;

const rule = (i: number, project: string, app: string | null): AlertRule => ({
  id: `alr_${project.replace(/\W/g, "")}${i.toString(36)}`,
  project,
  provider: null,
  model: null,
  app,
  metric: "requests",
  window: null,
  warn_pct: 70,
  critical_pct: 90,
  hysteresis_pct: 5,
  cooldown_s: 600,
  webhook: "https://hooks.example/headroom",
  created_at: new Date(0).toISOString(),
});

const byProject = new Map<string, AlertRule[]>();
byProject.set(
  "big",
  Array.from({ length: RULES }, (_, i) => rule(i, "big", MATCHING ? null : `app-${i}`)),
);
for (let p = 1; p < PROJECTS; p++) byProject.set(`p${p}`, [rule(0, `p${p}`, null)]);
const all = [...byProject.values()].flat();

const rowsOf = (projects: (i: number) => string) =>
  Array.from({ length: ROWS }, (_, i) => sampleRow(i, projects(i)));
const shared = rowsOf((i) => (i % PROJECTS === 0 ? "big" : `p${i % PROJECTS}`));
const othersOnly = rowsOf((i) => `p${(i % (PROJECTS - 1)) + 1}`);

const cache: RuleCache = {
  async rulesFor(projects) {
    const out = new Map<string, AlertRule[]>();
    for (const p of projects) out.set(p, byProject.get(p) ?? []);
    return out;
  },
};
let lastJob: EvalJobData | null = null;
const queue = {
  getJobCounts: async () => ({ wait: 0 }),
  add: async (_name: string, data: EvalJobData) => {
    lastJob = data;
  },
} as unknown as EvalQueue;
const hook = createAlertsHook({ rules: cache, queue, maxJobs: 1_000 });

async function time(fn: () => unknown | Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < RUNS + 3; i++) {
    const t0 = performance.now();
    await fn();
    if (i >= 3) ms.push(performance.now() - t0);
  }
  return ms.sort((a, b) => a - b)[Math.floor(ms.length / 2)] as number;
}

// Rows are copied per run: a row's windows are remembered per row object.
const fresh = (rows: ReportRow[]) => rows.map((r) => [...r]);
const hookShared = await time(() => hook({ token: "t", rows: fresh(shared) }));
const jobBytes = Buffer.byteLength(JSON.stringify(lastJob));
const jobRules = (lastJob as EvalJobData | null)?.rules.length ?? 0;
const hookOthers = await time(() => hook({ token: "t", rows: fresh(othersOnly) }));
const groupShared = await time(() => groupSeries(all, fresh(shared)));
const groupOthers = await time(() => groupSeries(all, fresh(othersOnly)));
console.log(
  JSON.stringify({
    rules_in_big: RULES,
    matching: MATCHING,
    rows: ROWS,
    big_rows: ROWS / PROJECTS,
    hook_ms_batch_with_big: Math.round(hookShared * 10) / 10,
    hook_ms_batch_without_big: Math.round(hookOthers * 10) / 10,
    job_rules: jobRules,
    job_kb: Math.round(jobBytes / 1024),
    group_ms_batch_with_big: Math.round(groupShared * 10) / 10,
    group_ms_batch_without_big: Math.round(groupOthers * 10) / 10,
  }),
);
