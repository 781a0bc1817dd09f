import type { AlertRule } from "./rule.js";
import type { RuleStore } from "./rule-store.js";

// Rules per project, cached for a short time, so the ingest worker asks Redis at most once per
// TTL per project (all the projects of a batch in one round trip), and a new or removed rule is
// seen within the TTL. A project without rules is cached too: that is the common case.

export interface RuleCache {
  rulesFor(projects: Iterable<string>): Promise<Map<string, AlertRule[]>>;
}

export function createRuleCache(
  store: Pick<RuleStore, "forProjects">,
  ttlMs: number,
  now: () => number = Date.now,
): RuleCache {
  const cache = new Map<string, { rules: AlertRule[]; until: number }>();
  return {
    async rulesFor(projects) {
      const t = now();
      const out = new Map<string, AlertRule[]>();
      const missing: string[] = [];
      for (const p of projects) {
        const hit = cache.get(p);
        if (hit && hit.until > t) out.set(p, hit.rules);
        else missing.push(p);
      }
      if (missing.length > 0) {
        const fresh = await store.forProjects(missing);
        for (const p of missing) {
          const rules = fresh.get(p) ?? [];
          cache.set(p, { rules, until: t + ttlMs });
          out.set(p, rules);
        }
      }
      return out;
    },
  };
}
