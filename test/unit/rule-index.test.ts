import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sampleRow } from "../../fixtures/sample-reports.js";
import { groupSeries } from "../../src/alerts/evaluate-batch.js";
import { createAlertsHook } from "../../src/alerts/ingest-hook.js";
import type { EvalJobData, EvalQueue } from "../../src/alerts/queues.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import { indexRules } from "../../src/alerts/rule-index.js";
import { matches, windowSamplesOf } from "../../src/alerts/usage.js";
import type { ReportRow } from "../../src/report/report-schema.js";

// Rules indexed by what they watch: a row costs the rules that match it, never every rule of its
// project (issue 42: 1,000 rules in one project made each of its rows look at all of them).

const PROVIDERS = ["openai", "anthropic", "groq"];
const APPS = ["chat-api", "batch-jobs", "search", "agent", "nightly"];

function rule(i: number, over: Partial<AlertRule> = {}): AlertRule {
  return {
    id: `alr_${i.toString(36)}`,
    project: "big",
    provider: null,
    model: null,
    app: null,
    metric: "requests",
    window: null,
    warn_pct: 70,
    critical_pct: 90,
    hysteresis_pct: 5,
    cooldown_s: 600,
    webhook: "https://hooks.example/h",
    created_at: "2025-01-01T00:00:00.000Z",
    ...over,
  };
}

const rows = (n: number, project = "big") =>
  Array.from({ length: n }, (_, i) => sampleRow(i, project));

/** `rules` behind proxies that count every read of a rule's fields. */
function counted(rules: AlertRule[]): { rules: AlertRule[]; reads: () => number } {
  let reads = 0;
  const proxied = rules.map(
    (r) =>
      new Proxy(r, {
        get(target, key, receiver) {
          reads++;
          return Reflect.get(target, key, receiver);
        },
      }),
  );
  return { rules: proxied, reads: () => reads };
}

describe("indexRules", () => {
  it("gives a row exactly the rules that match it, grouped by the figure they read", () => {
    const ruleArb = fc.record({
      project: fc.constantFrom("big", "p1"),
      provider: fc.option(fc.constantFrom(...PROVIDERS), { nil: null }),
      model: fc.option(fc.constantFrom("gpt-4o", "gpt-4o-mini", "claude-3-5-sonnet"), {
        nil: null,
      }),
      app: fc.option(fc.constantFrom(...APPS), { nil: null }),
      metric: fc.constantFrom("requests", "tokens", "credits"),
      window: fc.constantFrom(null, "1m", "1d"),
    });
    const sample = rows(40).concat(rows(10, "p1"));
    fc.assert(
      fc.property(fc.array(ruleArb, { maxLength: 30 }), (specs) => {
        const rules = specs.map((s, i) => rule(i, s as Partial<AlertRule>));
        const index = indexRules(rules);
        for (const row of sample) {
          const got = index.groupsFor(row).flatMap((g) => {
            for (const r of g.rules) {
              expect(r.metric).toBe(g.metric);
              expect(r.window).toBe(g.window);
            }
            return g.rules;
          });
          const want = rules.filter((r) => matches(r, row));
          expect(new Set(got)).toEqual(new Set(want));
          expect(got).toHaveLength(want.length);
        }
      }),
    );
  });
});

describe("what 1,000 rules of one project cost a batch", () => {
  // 1,000 rules on apps no row carries, and 1,000 on every row: either way a row reads no rule's
  // fields; the rules are read when the index is made (a few reads each), whatever the rows.
  const cases = [
    ["on other apps", (i: number) => rule(i, { app: `app-${i}` })],
    ["on every row", (i: number) => rule(i)],
  ] as const;

  it.each(cases)("the alerts worker's grouping, with 1,000 rules %s", (_name, make) => {
    const { rules, reads } = counted(Array.from({ length: 1_000 }, (_, i) => make(i)));
    const batch = rows(200);
    const inputs = groupSeries(rules, batch);
    expect(reads()).toBeLessThan(1_000 * 20);
    // Every rule on every row still gets each series it watches.
    const series = new Set(inputs.map((i) => i.field));
    if (_name === "on every row") expect(inputs.length).toBe(1_000 * series.size);
    else expect(inputs).toEqual([]);
  });

  it.each(cases)("the ingest worker's selection, with 1,000 rules %s", async (_name, make) => {
    const { rules, reads } = counted(Array.from({ length: 1_000 }, (_, i) => make(i)));
    let job: EvalJobData | null = null;
    const hook = createAlertsHook({
      rules: { rulesFor: async () => new Map([["big", rules]]) },
      queue: {
        getJobCounts: async () => ({ wait: 0 }),
        add: async (_n: string, data: EvalJobData) => {
          job = data;
        },
      } as unknown as EvalQueue,
      maxJobs: 10,
    });
    const batch = rows(200);
    await hook({ token: "t", rows: batch });
    expect(reads()).toBeLessThan(1_000 * 20);
    const watched = batch.filter(
      (r) => windowSamplesOf(r, { metric: "requests", window: null }).length > 0,
    );
    if (_name === "on every row") {
      expect((job as EvalJobData | null)?.rows).toEqual(watched);
      expect((job as EvalJobData | null)?.rules).toHaveLength(1_000);
    } else expect(job).toBeNull();
  });

  it("the grouping is the same as every rule against every row", () => {
    const rules = [
      rule(0),
      rule(1, { app: "chat-api" }),
      rule(2, { provider: "openai", metric: "tokens" }),
      rule(3, { project: "p1" }),
      rule(4, { window: "1m" }),
    ];
    const batch: ReportRow[] = rows(60).concat(rows(20, "p1"));
    const reference = rules.flatMap((r) =>
      batch
        .filter((row) => matches(r, row))
        .flatMap((row) =>
          windowSamplesOf(row, r).map((s) => ({
            rule: r.id,
            reportId: s.reportId,
            window: s.window,
          })),
        ),
    );
    const got = groupSeries(rules, batch).flatMap((i) =>
      i.samples.map((s) => ({ rule: i.rule.id, reportId: s.reportId, window: i.window })),
    );
    const key = (x: { rule: string; reportId: string; window: string | null }) =>
      `${x.rule} ${x.reportId} ${x.window}`;
    expect(got.map(key).sort()).toEqual(reference.map(key).sort());
  });
});
