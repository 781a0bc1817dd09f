import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { v4 as uuidv4 } from "uuid";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { AlertEvent } from "../../src/alerts/alert-event.js";
import { pacificDayStart, periodEnd } from "../../src/alerts/counted-windows.js";
import { evaluateBatch } from "../../src/alerts/evaluate-batch.js";
import { alertKeys } from "../../src/alerts/keys.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import { createStateStore, type StateStore } from "../../src/alerts/state-store.js";
import type { ProjectDeclarations } from "../../src/providers/declared-limit.js";
import { type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";
import { GEMINI_FREE_TIER_DAY_429 } from "../fixtures/providers/documented.js";
import { NO_LIMITS } from "../fixtures/providers/source.js";

// Counted windows in the alerts' state on a real Redis (issue 45): batches evaluated out of
// their reports' order count every report once, however often a batch is delivered again; a
// limit a Gemini 429 taught is remembered by the window's state and counts the later reports
// that state nothing.

let redis: Redis;
let prefix: string;
let store: StateStore;
let clock = Date.UTC(2030, 0, 15, 12);

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  prefix = `{t-${randomBytes(4).toString("hex")}}`;
  store = createStateStore(redis, prefix, {
    maxSeriesPerRule: 100,
    maxSeriesPerProject: 1000,
    now: () => clock,
  });
});

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

async function ruleOf(project: string): Promise<AlertRule> {
  const id = `r-${randomBytes(4).toString("hex")}`;
  await redis.hset(alertKeys(prefix).ruleIndex, id, project);
  return {
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
  };
}

/** A stored report of `provider`'s model, dated `at`, received a millisecond after the last. */
function report(
  project: string,
  provider: string,
  model: string,
  at: number,
  error: unknown = null,
): ReportRow {
  clock += 1;
  return toRow(
    toRecord(
      { provider, model, app: "app", timestamp: at, limits: NO_LIMITS, credits: null },
      { reportId: uuidv4(), projectId: project, keyId: "k", receivedAt: clock },
      { headers: null, error: error === null ? null : JSON.stringify(error) },
    ),
  );
}

const brief = (events: AlertEvent[]) =>
  events.map((e) => ({ level: e.level, window: e.window, remaining: e.remaining }));

describe("counted samples out of order", () => {
  it("counts a batch evaluated after a later one, once however often either comes again", async () => {
    const project = `p-${randomBytes(4).toString("hex")}`;
    const rule = await ruleOf(project);
    const declarations = new Map<string, ProjectDeclarations>([
      [
        project,
        {
          limits: [
            {
              provider: "bedrock",
              model: "claude",
              dimension: "requests",
              window: "1m",
              limit: 60,
            },
          ],
          pools: [],
        },
      ],
    ]);
    const minute = Math.floor(clock / 60_000) * 60_000 + 60_000;
    const rows = Array.from({ length: 54 }, (_, i) =>
      report(project, "bedrock", "claude", minute + 1_000 + 100 * i),
    );
    const evaluate = async (token: string, batch: ReportRow[]) => {
      const events = await evaluateBatch(
        store,
        token,
        [rule],
        batch,
        undefined,
        undefined,
        undefined,
        declarations,
      );
      await store.clearOutbox(token);
      return brief(events);
    };
    // The second batch first, then the first, then each again (a redelivery after a crash).
    expect(await evaluate("b", rows.slice(20, 41))).toEqual([]);
    expect(await evaluate("a", rows.slice(0, 20))).toEqual([]);
    expect(await evaluate("b", rows.slice(20, 41))).toEqual([]);
    expect(await evaluate("a", rows.slice(0, 20))).toEqual([]);
    // The 42nd report of the minute is 70 % of 60: one warning, and none on its redelivery.
    expect(await evaluate("c", rows.slice(41, 42))).toEqual([
      { level: "warning", window: "1m", remaining: 18 },
    ]);
    expect(await evaluate("c", rows.slice(41, 42))).toEqual([]);
    // The last report first; the eleven before it, late, make 54 of 60: 90 %, one critical.
    expect(await evaluate("e", rows.slice(53))).toEqual([]);
    expect(await evaluate("d", rows.slice(42, 53))).toEqual([
      { level: "critical", window: "1m", remaining: 6 },
    ]);
    expect(await evaluate("d", rows.slice(42, 53))).toEqual([]);
    // Each report counted once.
    const more = report(project, "bedrock", "claude", minute + 1_000 + 100 * 54);
    const state = await redis.hget(
      alertKeys(prefix).state(rule.id),
      JSON.stringify(["bedrock", "claude", "app", "1m"]),
    );
    expect(JSON.parse(state ?? "{}").k[`m:${minute}`][0]).toBe(54);
    expect(await evaluate("f", [more])).toEqual([]);
  });
});

describe("a learned limit in the alerts' state", () => {
  it("counts Gemini's later reports against the 250 a day its 429 taught: a warning at the 175th", async () => {
    const project = `p-${randomBytes(4).toString("hex")}`;
    const rule = await ruleOf(project);
    const midnight = periodEnd("p", pacificDayStart(clock));
    const gemini = (at: number, error: unknown = null) =>
      report(project, "gemini", "gemini-2.5-flash", at, error);
    const evaluate = async (token: string, batch: ReportRow[]) => {
      const events = await evaluateBatch(store, token, [rule], batch);
      await store.clearOutbox(token);
      return brief(events);
    };
    // Ten minutes before a Pacific midnight the day's quota runs out.
    expect(await evaluate("g429", [gemini(midnight - 600_000, GEMINI_FREE_TIER_DAY_429)])).toEqual([
      { level: "critical", window: "1d", remaining: 0 },
    ]);
    // The next day's calls state nothing: counted against the learned 250.
    const day = Array.from({ length: 175 }, (_, i) => gemini(midnight + 60_000 + i * 1_000));
    expect(await evaluate("g1", day.slice(0, 174))).toEqual([
      { level: "resolved", window: "1d", remaining: 249 },
    ]);
    expect(await evaluate("g1", day.slice(0, 174))).toEqual([]);
    expect(await evaluate("g2", day.slice(174))).toEqual([
      { level: "warning", window: "1d", remaining: 75 },
    ]);
  });

  it("tracks nothing for a provider that taught no limit (DeepSeek: unknown)", async () => {
    const project = `p-${randomBytes(4).toString("hex")}`;
    const rule = await ruleOf(project);
    const rows = Array.from({ length: 3 }, () => report(project, "deepseek", "chat", clock));
    expect(await evaluateBatch(store, "ds", [rule], rows)).toEqual([]);
    // Only the window of unknown length a call of the model keeps ("room again"), none counted.
    expect(await redis.zrange(alertKeys(prefix).series(rule.id), 0, -1)).toEqual([
      JSON.stringify(["deepseek", "chat", "app"]),
    ]);
  });
});
