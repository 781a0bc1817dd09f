import { randomBytes } from "node:crypto";
import type { RedisClient } from "../redis/connections.js";
import { alertKeys } from "./keys.js";
import { type AlertRule, parseRuleInput, type RuleInput, ruleSchema } from "./rule.js";
import { newSecret } from "./signing.js";

// Rules in Redis. The signing secret must be readable to sign, so it is stored (apart from the
// rule), returned once by `create`, and otherwise read only by the webhook sender.

export interface RuleStore {
  create(input: RuleInput): Promise<{ rule: AlertRule; secret: string }>;
  /** Replaces a rule's fields (its id, project, created_at and secret stay); null: no such rule. */
  update(id: string, input: RuleInput): Promise<AlertRule | null>;
  get(id: string): Promise<AlertRule | null>;
  list(project?: string): Promise<AlertRule[]>;
  /** Rules of each project, in one round trip. */
  forProjects(projects: string[]): Promise<Map<string, AlertRule[]>>;
  secret(id: string): Promise<string | null>;
  remove(id: string): Promise<boolean>;
}

/** A rule that does not parse (edited by hand, or from a newer version) is skipped, not fatal:
 * ingestion must never stop for a bad rule. */
function parseRules(hash: Record<string, string>): AlertRule[] {
  const rules: AlertRule[] = [];
  for (const json of Object.values(hash)) {
    try {
      const parsed = ruleSchema.safeParse(JSON.parse(json));
      if (parsed.success) rules.push(parsed.data);
    } catch {
      // Not JSON: skipped like any other unreadable rule.
    }
  }
  return rules;
}

export function createRuleStore(redis: RedisClient, prefix: string): RuleStore {
  const k = alertKeys(prefix);
  return {
    async create(input) {
      const fields = parseRuleInput(input);
      const rule: AlertRule = {
        id: `alr_${randomBytes(8).toString("hex")}`,
        ...fields,
        created_at: new Date().toISOString(),
      };
      const secret = newSecret();
      await redis
        .multi()
        .hset(k.rules(rule.project), rule.id, JSON.stringify(rule))
        .hset(k.ruleIndex, rule.id, rule.project)
        .hset(k.secrets, rule.id, secret)
        .exec();
      return { rule, secret };
    },

    async update(id, input) {
      const current = await this.get(id);
      if (current === null) return null;
      const fields = parseRuleInput({ ...input, project: current.project });
      const rule: AlertRule = { id, ...fields, created_at: current.created_at };
      await redis.hset(k.rules(rule.project), rule.id, JSON.stringify(rule));
      return rule;
    },

    async get(id) {
      const project = await redis.hget(k.ruleIndex, id);
      if (project === null) return null;
      const json = await redis.hget(k.rules(project), id);
      return json === null ? null : ruleSchema.parse(JSON.parse(json));
    },

    async list(project) {
      const projects =
        project === undefined
          ? [...new Set(Object.values(await redis.hgetall(k.ruleIndex)))]
          : [project];
      const byProject = await this.forProjects(projects);
      return [...byProject.values()]
        .flat()
        .sort(
          (a, b) => a.project.localeCompare(b.project) || a.created_at.localeCompare(b.created_at),
        );
    },

    async forProjects(projects) {
      const out = new Map<string, AlertRule[]>();
      if (projects.length === 0) return out;
      const pipeline = redis.pipeline();
      for (const p of projects) pipeline.hgetall(k.rules(p));
      const results = (await pipeline.exec()) ?? [];
      projects.forEach((p, i) => {
        const [err, hash] = results[i] ?? [new Error("no reply"), null];
        if (err) throw err;
        out.set(p, parseRules((hash ?? {}) as Record<string, string>));
      });
      return out;
    },

    secret: (id) => redis.hget(k.secrets, id),

    async remove(id) {
      const project = await redis.hget(k.ruleIndex, id);
      if (project === null) return false;
      // Its series no longer count against the project's cap.
      const series = await redis.zrange(k.series(id), 0, -1);
      const tx = redis
        .multi()
        .hdel(k.rules(project), id)
        .hdel(k.ruleIndex, id)
        .hdel(k.secrets, id)
        .hset(k.removedRules, id, new Date().toISOString())
        .del(k.state(id), k.series(id));
      if (series.length > 0) tx.zrem(k.projectSeries(project), ...series.map((f) => `${id} ${f}`));
      await tx.exec();
      return true;
    },
  };
}
