import { randomBytes } from "node:crypto";
import type { RedisClient } from "../redis/connections.js";
import { alertKeys } from "./keys.js";
import { type AlertRule, parseRuleInput, type RuleInput, ruleSchema } from "./rule.js";
import { newSecret } from "./signing.js";

// Rules in Redis. The signing secret must be readable to sign, so it is stored (apart from the
// rule), returned once by `create`, and otherwise read only by the webhook sender.

export interface RuleStore {
  /**
   * A new rule and its signing secret. With `max`, refused (RuleCapError) when its project has
   * that many rules already: counted and written in one script, so rules made at once never
   * pass the cap together.
   */
  create(input: RuleInput, opts?: { max?: number }): Promise<{ rule: AlertRule; secret: string }>;
  /**
   * Replaces a rule's fields (its id, project, created_at and secret stay); null: no such rule,
   * also when it is removed while the update runs (the write is refused then, never made).
   */
  update(id: string, input: RuleInput): Promise<AlertRule | null>;
  get(id: string): Promise<AlertRule | null>;
  list(project?: string): Promise<AlertRule[]>;
  /** Rules of each project, in one round trip. */
  forProjects(projects: string[]): Promise<Map<string, AlertRule[]>>;
  secret(id: string): Promise<string | null>;
  remove(id: string): Promise<boolean>;
}

/**
 * Removed rules remembered (for a restore's merge): past it the oldest half are forgotten, so
 * that removals, like everything else a tenant writes, hold a bounded share of Redis. A merge of
 * a backup older than the last this-many removals may bring back a rule removed before them.
 */
export const MAX_REMOVED_RULES = 10_000;

/** A project's rules are at its cap: the rule is not made. */
export class RuleCapError extends Error {
  override name = "RuleCapError";
  constructor(
    readonly project: string,
    readonly max: number,
  ) {
    super(`project ${project} has ${max} alert rules, its cap`);
  }
}

// KEYS: the project's rules, the index, the secrets. ARGV: id, rule JSON, project, secret, cap
// (-1: none). 0: at the cap, nothing written.
const CREATE = `
local cap = tonumber(ARGV[5])
if cap >= 0 and redis.call('HLEN', KEYS[1]) >= cap then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
return 1
`;

// KEYS: the project's rules, the index. ARGV: id, rule JSON, project. A rule removed since it was
// read is not written back: a write racing a removal would leave a rule that is listed (in its
// project's hash) but cannot be removed (no longer in the index).
const UPDATE = `
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[3] then return 0 end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`;

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

  /** The oldest half of the removed rules forgotten (their values are ISO times). */
  async function forgetOldest() {
    const all = Object.entries(await redis.hgetall(k.removedRules));
    all.sort(([, a], [, b]) => (a < b ? -1 : a > b ? 1 : 0));
    const drop = all.slice(0, all.length - Math.floor(MAX_REMOVED_RULES / 2)).map(([id]) => id);
    for (let i = 0; i < drop.length; i += 1_000) {
      await redis.hdel(k.removedRules, ...drop.slice(i, i + 1_000));
    }
  }
  return {
    async create(input, opts = {}) {
      const fields = parseRuleInput(input);
      const rule: AlertRule = {
        id: `alr_${randomBytes(8).toString("hex")}`,
        ...fields,
        created_at: new Date().toISOString(),
      };
      const secret = newSecret();
      const max = opts.max ?? -1;
      const made = await redis.eval(
        CREATE,
        3,
        k.rules(rule.project),
        k.ruleIndex,
        k.secrets,
        rule.id,
        JSON.stringify(rule),
        rule.project,
        secret,
        max,
      );
      if (made !== 1) throw new RuleCapError(rule.project, max);
      return { rule, secret };
    },

    async update(id, input) {
      const current = await this.get(id);
      if (current === null) return null;
      const fields = parseRuleInput({ ...input, project: current.project });
      const rule: AlertRule = { id, ...fields, created_at: current.created_at };
      const written = await redis.eval(
        UPDATE,
        2,
        k.rules(rule.project),
        k.ruleIndex,
        rule.id,
        JSON.stringify(rule),
        rule.project,
      );
      return written === 1 ? rule : null;
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
      tx.hlen(k.removedRules);
      const results = (await tx.exec()) ?? [];
      const remembered = Number(results.at(-1)?.[1] ?? 0);
      if (remembered > MAX_REMOVED_RULES) await forgetOldest();
      return true;
    },
  };
}
