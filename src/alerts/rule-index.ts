import type { WindowLength } from "../providers/window.js";
import type { ReportRow } from "../report/report-schema.js";
import type { AlertRule } from "./rule.js";
import { projectOf, type Series, seriesOf } from "./usage.js";

// Rules indexed by what they watch, so that a row costs the rules that match it and not every
// rule of its project: a project with 1,000 rules on other apps costs its rows 8 look-ups each,
// and rules that read the same figure (metric and window) of a row share one reading of it.
// Keyed by project, then provider, model and app, each either a value or null (the rule's "any").

/** Rules of one project and filter that read the same figure of a row. */
export interface RuleGroup {
  metric: string;
  window: WindowLength | null | undefined;
  rules: AlertRule[];
}

/** Figure key (metric@window) → group; then app, model, provider (null: any), project. */
type Leaf = Map<string, RuleGroup>;
type ByApp = Map<string | null, Leaf>;
type ByModel = Map<string | null, ByApp>;
type ByProvider = Map<string | null, ByModel>;

export interface RuleIndex {
  /** The groups whose rules match the row's project, provider, model and app. */
  groupsFor(row: ReportRow): RuleGroup[];
}

const figureKey = (r: Pick<AlertRule, "metric" | "window">) => `${r.metric}@${r.window ?? ""}`;

/** The value at `key`, made first when there is none. */
export function child<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let next = map.get(key);
  if (next === undefined) {
    next = make();
    map.set(key, next);
  }
  return next;
}

export function indexRules(rules: Iterable<AlertRule>): RuleIndex {
  const projects = new Map<string, ByProvider>();
  for (const rule of rules) {
    const byProvider = child(projects, rule.project, (): ByProvider => new Map());
    const byModel = child(byProvider, rule.provider, (): ByModel => new Map());
    const byApp = child(byModel, rule.model, (): ByApp => new Map());
    const leaf = child(byApp, rule.app, (): Leaf => new Map());
    const group = child(leaf, figureKey(rule), () => ({
      metric: rule.metric,
      window: rule.window,
      rules: [],
    }));
    group.rules.push(rule);
  }
  return {
    groupsFor(row) {
      const byProvider = projects.get(projectOf(row));
      if (!byProvider) return [];
      const s: Series = seriesOf(row);
      // A stored row without a model matches only rules on any model (usage.ts's `matches`).
      const model = s.model === "" ? null : s.model;
      const out: RuleGroup[] = [];
      for (const p of [s.provider, null]) {
        const byModel = byProvider.get(p);
        if (!byModel) continue;
        for (const m of model === null ? [null] : [model, null]) {
          const byApp = byModel.get(m);
          if (!byApp) continue;
          for (const a of [s.app, null]) {
            const leaf = byApp.get(a);
            if (leaf) for (const g of leaf.values()) out.push(g);
          }
        }
      }
      return out;
    },
  };
}
