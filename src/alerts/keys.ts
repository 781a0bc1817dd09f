// Every Redis key of the alerts, under the queue prefix so they share its hash tag (one Redis
// Cluster slot, as the Lua scripts need).

export interface AlertKeys {
  /** Hash per project: rule id → rule JSON. */
  rules: (project: string) => string;
  /** Hash: rule id → project. */
  ruleIndex: string;
  /** Hash: removed rule id → when (ISO): a restore's merge never brings a removed rule back. */
  removedRules: string;
  /** Hash: rule id → signing secret (kept apart, so rules can be read without secrets). */
  secrets: string;
  /** Hash per rule: series → state JSON. */
  state: (ruleId: string) => string;
  /** Sorted set per rule: series → when it was last written (ms); bounds and expires them. */
  series: (ruleId: string) => string;
  /** Sorted set per project: `<rule id> <series>` → when it was last written (ms). */
  projectSeries: (project: string) => string;
  /** Events of one evaluated batch not yet stored and queued. */
  outbox: (token: string) => string;
  /** Set once a batch's states were committed, while its counted samples could come again. */
  applied: (token: string) => string;
}

export function alertKeys(prefix: string): AlertKeys {
  return {
    rules: (project: string) => `${prefix}:alert-rules:${project}`,
    ruleIndex: `${prefix}:alert-rule-index`,
    removedRules: `${prefix}:alert-rules-removed`,
    secrets: `${prefix}:alert-secrets`,
    state: (ruleId: string) => `${prefix}:alert-state:${ruleId}`,
    series: (ruleId: string) => `${prefix}:alert-series:${ruleId}`,
    projectSeries: (project: string) => `${prefix}:alert-project-series:${project}`,
    outbox: (token: string) => `${prefix}:alert-outbox:${token}`,
    applied: (token: string) => `${prefix}:alert-applied:${token}`,
  };
}
