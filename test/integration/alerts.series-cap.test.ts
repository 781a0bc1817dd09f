import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createAlertsWorker } from "../../src/alerts/create-alerts-worker.js";
import { evaluateBatch, type RefusedSeries } from "../../src/alerts/evaluate-batch.js";
import { alertKeys } from "../../src/alerts/keys.js";
import { createAlertsMetrics } from "../../src/alerts/metrics.js";
import { EVAL_JOB } from "../../src/alerts/queues.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import { createRuleStore } from "../../src/alerts/rule-store.js";
import { createStateStore } from "../../src/alerts/state-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";
import { alertsFixture } from "../helpers/alerts-fixture.js";
import { startPipeline } from "../helpers/pipeline.js";

// A project's clients choose their `app` names, and each name is a series of every project-wide
// rule. Whatever names arrive, the alert state a rule and a project hold in Redis stays under
// their caps, the excess is told, known series keep alerting, and idle series expire one by one.

let redis: Redis;
let prefix: string;
let clock = Date.now();
const HOUR = 3_600_000;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  prefix = `{t-${randomBytes(4).toString("hex")}}`;
});

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

/** A rule as the rule store lists it: in the rule index (a removed rule is skipped). */
async function rule(id: string, project: string): Promise<AlertRule> {
  await redis.hset(alertKeys(prefix).ruleIndex, id, project);
  return ruleOf(id, project);
}

const ruleOf = (id: string, project: string): AlertRule => ({
  id,
  project,
  provider: null,
  model: null,
  app: null,
  metric: "requests",
  warn_pct: 70,
  critical_pct: 90,
  hysteresis_pct: 5,
  cooldown_s: 0,
  webhook: "http://127.0.0.1:1/hook",
  created_at: new Date(0).toISOString(),
});

function row(project: string, app: string, usedPct: number): ReportRow {
  clock += 1_000;
  return toRow(
    toRecord(
      {
        provider: "openai",
        app,
        model: "gpt-4o",
        timestamp: clock,
        limits: {
          requests_limit: 1000,
          requests_remaining: 1000 - usedPct * 10,
          tokens_limit: null,
          tokens_remaining: null,
          reset_requests_ms: 60_000,
          reset_tokens_ms: null,
        },
        credits: null,
      },
      { reportId: uuidv7({ msecs: clock }), projectId: project, keyId: "k", receivedAt: clock },
    ),
  );
}

/** Two rules of `project` made by the rule store, as `alerts add` makes them. */
async function twoRules(project: string): Promise<[AlertRule, AlertRule]> {
  const rules = createRuleStore(redis, prefix);
  const input = {
    project,
    metric: "requests" as const,
    warn_pct: 70,
    critical_pct: 90,
    webhook: "http://127.0.0.1:1/hook",
  };
  return [(await rules.create(input)).rule, (await rules.create(input)).rule];
}

const store = (perRule: number, perProject: number) =>
  createStateStore(redis, prefix, {
    maxSeriesPerRule: perRule,
    maxSeriesPerProject: perProject,
    ttlMs: 24 * HOUR,
    now: () => clock,
  });

describe("alert series caps", () => {
  it("a rule tracks at most its cap of series, tells the rest, and keeps alerting on those it has", async () => {
    const s = store(5, 1_000);
    const r = await rule("alr_cap1", "p-cap1");
    const refused: RefusedSeries[] = [];
    for (let i = 0; i < 40; i++) {
      await evaluateBatch(s, `b1-${i}`, [r], [row(r.project, `app-${i}`, 10)], (x) =>
        refused.push(...x),
      );
    }
    const k = alertKeys(prefix);
    expect(await redis.hlen(k.state(r.id))).toBe(5);
    expect(await redis.zcard(k.series(r.id))).toBe(5);
    expect(refused.map((x) => x.series.app)).toEqual(
      Array.from({ length: 35 }, (_, i) => `app-${i + 5}`),
    );
    // A series the rule tracks still alerts; one it refused does not.
    const events = await evaluateBatch(
      s,
      "b1-known",
      [r],
      [row(r.project, "app-2", 95), row(r.project, "app-30", 95)],
    );
    expect(events.map((e) => [e.app, e.level])).toEqual([["app-2", "critical"]]);
  });

  it("all rules of a project together track at most the project's cap", async () => {
    const s = store(100, 7);
    const rules = createRuleStore(redis, prefix);
    const [a, b] = await twoRules("p-cap2");
    for (let i = 0; i < 30; i++) {
      await evaluateBatch(s, `b2-${i}`, [a, b], [row("p-cap2", `app-${i}`, 10)]);
    }
    const k = alertKeys(prefix);
    const held = (await redis.hlen(k.state(a.id))) + (await redis.hlen(k.state(b.id)));
    expect(held).toBe(7);
    expect(await redis.zcard(k.projectSeries("p-cap2"))).toBe(7);
    // Removing a rule frees its places in the project.
    expect(await rules.remove(a.id)).toBe(true);
    expect(await redis.zcard(k.projectSeries("p-cap2"))).toBe(await redis.hlen(k.state(b.id)));
    await evaluateBatch(s, "b2-after", [b], [row("p-cap2", "new-app", 10)]);
    expect(
      await redis.hexists(k.state(b.id), JSON.stringify(["openai", "gpt-4o", "new-app"])),
    ).toBe(1);
  });

  it("a removed rule, still named by a cache or a job's copy of the rules, keeps nothing and fires nothing", async () => {
    const s = store(100, 1_000);
    const rules = createRuleStore(redis, prefix);
    const [gone, kept] = await twoRules("p-gone");
    await evaluateBatch(s, "g-1", [gone, kept], [row("p-gone", "chat", 10)]);
    expect(await rules.remove(gone.id)).toBe(true);
    const events = await evaluateBatch(s, "g-2", [gone, kept], [row("p-gone", "ghost", 95)]);
    expect(events.map((e) => [e.rule_id, e.app, e.level])).toEqual([
      [kept.id, "ghost", "critical"],
    ]);
    const k = alertKeys(prefix);
    expect(await redis.exists(k.state(gone.id), k.series(gone.id))).toBe(0);
    const members = await redis.zrange(k.projectSeries("p-gone"), 0, -1);
    expect(members.filter((m) => m.startsWith(gone.id))).toEqual([]);
  });

  it("a series idle for the TTL is dropped, and its place taken by a new one", async () => {
    const s = store(3, 1_000);
    const r = await rule("alr_cap3", "p-cap3");
    for (const app of ["a", "b", "c"])
      await evaluateBatch(s, `b3-${app}`, [r], [row(r.project, app, 10)]);
    clock += 12 * HOUR;
    await evaluateBatch(s, "b3-c2", [r], [row(r.project, "c", 10)]);
    clock += 13 * HOUR;
    // a and b are idle for 25 h (over the 24 h TTL); c wrote 13 h ago.
    const refused: RefusedSeries[] = [];
    await evaluateBatch(s, "b3-d", [r], [row(r.project, "d", 10), row(r.project, "e", 10)], (x) =>
      refused.push(...x),
    );
    expect(refused).toEqual([]);
    const k = alertKeys(prefix);
    const fields = (await redis.hkeys(k.state(r.id))).map((f) => (JSON.parse(f) as string[])[2]);
    expect(fields.sort()).toEqual(["c", "d", "e"]);
  });
});

describe("the alerts worker at the cap", () => {
  it("counts the refused series in its metrics and logs the rule, once per interval", {
    timeout: 60_000,
  }, async () => {
    const p = await startPipeline({ ALERTS_MAX_SERIES_PER_RULE: "2", ALERTS_RULES_TTL_MS: "0" });
    const fx = alertsFixture(p);
    const lines: string[] = [];
    const metrics = createAlertsMetrics();
    const worker = createAlertsWorker({
      config: p.config,
      redis: p.redis,
      clickhouse: p.client,
      logger: createLogger("warn", "test", { write: (l: string) => lines.push(l) }),
      metrics,
    });
    worker.start();
    try {
      const { rule } = await fx.rules.create({
        project: "p-cap4",
        metric: "requests" as const,
        warn_pct: 70,
        critical_pct: 90,
        webhook: "http://127.0.0.1:1/hook",
      });
      for (let i = 0; i < 6; i++) {
        await fx.evalQueue.add(EVAL_JOB, {
          v: 1,
          token: `cap4-${i}`,
          rules: [rule],
          rows: [row("p-cap4", `app-${i}`, 10)],
        });
      }
      await fx.settled();
      expect((await metrics.seriesRefused.get()).values[0]?.value).toBe(4);
      const logged = lines.filter((l) => l.includes("alert series over the cap"));
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain(rule.id);
    } finally {
      await worker.close();
      await fx.close();
      await p.close();
    }
  });
});
