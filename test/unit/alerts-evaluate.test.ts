import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { NULL_LIMITS } from "../../fixtures/sample-reports.js";
import { evaluateBatch, type SeriesFailure, windowField } from "../../src/alerts/evaluate-batch.js";
import { evaluateSeries } from "../../src/alerts/evaluate-series.js";
import type { AlertRule } from "../../src/alerts/rule.js";
import type { CommitResult, StateStore, StateWrite } from "../../src/alerts/state-store.js";
import { sampleOf } from "../../src/alerts/usage.js";
import { deriveWindows } from "../../src/providers/derive-windows.js";
import { REPORT_COLUMNS, type ReportRow, toRecord, toRow } from "../../src/report/report-schema.js";

// A batch through the rules: series, order, idempotency (a batch evaluated again fires nothing
// new), deterministic event ids, and the outbox. The state store here is an in-memory one with
// the same compare-and-set contract as the Redis one.

const rule: AlertRule = {
  id: "alr_test",
  project: "acme",
  provider: "openai",
  model: null,
  app: null,
  metric: "requests",
  warn_pct: 70,
  critical_pct: 90,
  hysteresis_pct: 5,
  cooldown_s: 600,
  webhook: "http://127.0.0.1:1/hook",
  created_at: "2025-01-01T00:00:00.000Z",
};

const T0 = Date.UTC(2025, 0, 1, 12);

function row(usedPct: number, i: number, extra: Partial<Record<string, unknown>> = {}): ReportRow {
  const limits = {
    requests_limit: 1000,
    requests_remaining: 1000 - usedPct * 10,
    tokens_limit: null,
    tokens_remaining: null,
    reset_requests_ms: 60_000,
    reset_tokens_ms: null,
  };
  return toRow(
    toRecord(
      {
        provider: "openai",
        app: "chat",
        model: "gpt-4o",
        timestamp: T0 + i * 1_000,
        limits,
        credits: null,
        ...extra,
      } as Parameters<typeof toRecord>[0],
      {
        reportId: uuidv7({ msecs: T0 + i * 1_000 }),
        projectId: "acme",
        keyId: "k",
        receivedAt: T0 + i * 1_000,
      },
    ),
  );
}

function memoryStore() {
  const states = new Map<string, string>();
  const outboxes = new Map<string, string>();
  const key = (w: { ruleId: string; field: string }) => `${w.ruleId} ${w.field}`;
  let commits = 0;
  const store: StateStore = {
    async read(token, refs) {
      return {
        outbox: outboxes.get(token) ?? null,
        states: refs.map((r) => states.get(key(r)) ?? null),
        refused: refs.map(() => false),
        removed: refs.map(() => false),
        applied: false,
        now: T0,
      };
    },
    async commit(token, writes: StateWrite[], outbox): Promise<CommitResult> {
      commits += 1;
      const existing = outboxes.get(token);
      if (existing) return { ok: false, outbox: existing };
      if (writes.some((w) => (states.get(key(w)) ?? null) !== w.prev)) {
        return { ok: false, conflict: true };
      }
      for (const w of writes) states.set(key(w), w.next);
      if (outbox) outboxes.set(token, outbox);
      return { ok: true };
    },
    async clearOutbox(token) {
      outboxes.delete(token);
    },
  };
  return { store, states, outboxes, commits: () => commits };
}

const levels = (events: { level: string }[]) => events.map((e) => e.level);

describe("batch evaluation", () => {
  it("fires warning, critical, resolved for 50, 75, 95, 95, 60, 40 — in report order", async () => {
    const { store } = memoryStore();
    const rows = [50, 75, 95, 95, 60, 40].map((p, i) => row(p, i)).reverse();
    const events = await evaluateBatch(store, "t1", [rule], rows);
    expect(levels(events)).toEqual(["warning", "critical", "resolved"]);
    const critical = events[1];
    expect(critical).toMatchObject({
      project: "acme",
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      metric: "requests",
      used_pct: 95,
      limit: 1000,
      remaining: 50,
      reset_ms: 60_000,
      at: new Date(T0 + 2_000).toISOString(),
    });
    // 450 requests used between the 1st and the 3rd report (2 s): 225/s; the 50 left run out
    // in 0.2 s, before the window resets in 60 s.
    expect(critical?.burn_per_s).toBe(225);
    expect(critical?.exhaustion_eta_s).toBe(0.2);
  });

  it("a batch evaluated again after it finished fires nothing and writes nothing", async () => {
    const m = memoryStore();
    const rows = [50, 75, 95].map((p, i) => row(p, i));
    expect(await evaluateBatch(m.store, "t1", [rule], rows)).toHaveLength(2);
    await m.store.clearOutbox("t1");
    const commits = m.commits();
    expect(await evaluateBatch(m.store, "t1", [rule], rows)).toEqual([]);
    expect(m.commits()).toBe(commits);
  });

  it("a batch evaluated again before it finished gets the same events from its outbox", async () => {
    const m = memoryStore();
    const rows = [75, 95].map((p, i) => row(p, i));
    const first = await evaluateBatch(m.store, "t1", [rule], rows);
    const again = await evaluateBatch(m.store, "t1", [rule], rows);
    expect(again).toEqual(first);
  });

  it("event ids are the same for the same state and rows, different for other series", () => {
    const rows = [75, 95].map((p, i) => row(p, i));
    const samples = rows.map((r) => sampleOf(r, "requests")).filter((s) => s !== null);
    const series = { provider: "openai", model: "gpt-4o", app: "chat" };
    const a = evaluateSeries(rule, series, samples, null).events.map((e) => e.id);
    const b = evaluateSeries(rule, series, samples, null).events.map((e) => e.id);
    const c = evaluateSeries(rule, { ...series, app: "other" }, samples, null).events;
    expect(a).toEqual(b);
    expect(new Set(a).size).toBe(2);
    expect(a).not.toContain(c[0]?.id);
    expect(a[0]).toMatch(/^evt_[0-9a-f]{32}$/);
  });

  it("a late report, older than what was applied, changes nothing", async () => {
    const m = memoryStore();
    await evaluateBatch(m.store, "t1", [rule], [row(50, 10)]);
    expect(await evaluateBatch(m.store, "t2", [rule], [row(99, 5)])).toEqual([]);
  });

  it("a report dated a day ahead by the client holds no later report back", async () => {
    const m = memoryStore();
    const ahead = row(10, 1, { timestamp: T0 + 23 * 3_600_000 });
    await evaluateBatch(m.store, "t1", [rule], [ahead]);
    const events = await evaluateBatch(m.store, "t2", [rule], [row(95, 2)]);
    expect(levels(events)).toEqual(["critical"]);
    expect(events[0]?.at).toBe(new Date(T0 + 2_000).toISOString());
  });

  it("a state stored with the client's times keeps its level but not its times", async () => {
    const m = memoryStore();
    const future = T0 + 23 * 3_600_000;
    const legacy = {
      m: { level: "warning", notified: "warning", sentAt: { warning: future }, seq: 1 },
      wm: [future, "ffffffff-ffff-7fff-bfff-ffffffffffff"],
      h: [[future, 250]],
    };
    m.states.set(
      `${rule.id} ${JSON.stringify(["openai", "gpt-4o", "chat"])}`,
      JSON.stringify(legacy),
    );
    const events = await evaluateBatch(m.store, "t1", [rule], [row(40, 1), row(95, 2)]);
    expect(levels(events)).toEqual(["resolved", "critical"]);
  });

  it("orders a batch by when the edge received its reports, not by their timestamps", async () => {
    const m = memoryStore();
    // Received in this order; the clients' clocks say the opposite.
    const rows = [95, 40].map((p, i) => row(p, i, { timestamp: T0 + (1 - i) * 60_000 }));
    expect(levels(await evaluateBatch(m.store, "t1", [rule], rows))).toEqual([
      "critical",
      "resolved",
    ]);
  });

  it("provider hints and rows of other providers, projects or metrics are ignored", async () => {
    const m = memoryStore();
    const hint = row(0, 0, {
      model: null,
      limits: NULL_LIMITS,
    });
    const other = row(99, 1, { provider: "anthropic" });
    expect(await evaluateBatch(m.store, "t1", [rule], [hint, other])).toEqual([]);
    expect(m.states.size).toBe(0);
    expect(
      await evaluateBatch(m.store, "t2", [{ ...rule, metric: "tokens" }], [row(99, 2)]),
    ).toEqual([]);
  });

  it("series are per provider, model and app: each alerts on its own", async () => {
    const m = memoryStore();
    const anyProvider = { ...rule, provider: null };
    const rows = [row(95, 0), row(95, 1, { app: "search" }), row(95, 2, { provider: "groq" })];
    const events = await evaluateBatch(m.store, "t1", [anyProvider], rows);
    expect(events.map((e) => [e.provider, e.app, e.level])).toEqual([
      ["openai", "chat", "critical"],
      ["openai", "search", "critical"],
      ["groq", "chat", "critical"],
    ]);
  });

  it("a conflicting write by another worker is read again and recomputed", async () => {
    const m = memoryStore();
    const rows = [row(75, 0)];
    const real = m.store.commit;
    let raced = false;
    m.store.commit = async (token, writes, outbox) => {
      if (!raced) {
        raced = true;
        // Another worker applied a later report to the same series meanwhile.
        await evaluateBatch({ ...m.store, commit: real }, "other", [rule], [row(95, 1)]);
      }
      return real(token, writes, outbox);
    };
    // Our older report is now behind the watermark: it fires nothing.
    expect(await evaluateBatch(m.store, "t1", [rule], rows)).toEqual([]);
    expect(raced).toBe(true);
  });

  it("takes a stored reset of 9e15 ms (a row from before the bound) without a throw: reset unknown", async () => {
    const m = memoryStore();
    const stored = row(95, 0);
    stored[REPORT_COLUMNS.indexOf("reset_requests_ms")] = 9e15;
    const events = await evaluateBatch(m.store, "t1", [rule], [stored]);
    expect(events.map((e) => [e.level, e.reset_ms])).toEqual([["critical", null]]);
  });
});

describe("each series apart", () => {
  const PROJECT_AT = REPORT_COLUMNS.indexOf("project_id");
  const of = (project: string, r: ReportRow) => {
    r[PROJECT_AT] = project;
    return r;
  };
  const other: AlertRule = { ...rule, id: "alr_other", project: "other" };

  it("a series that throws is told (stage evaluate) and kept as it was; the others fire", async () => {
    const m = memoryStore();
    // acme's stored state is no JSON: reading it throws.
    const field = windowField({ provider: "openai", model: "gpt-4o", app: "chat" }, null);
    m.states.set(`${rule.id} ${field}`, "{not json");
    const failures: SeriesFailure[] = [];
    const events = await evaluateBatch(
      m.store,
      "t1",
      [rule, other],
      [row(95, 0), of("other", row(95, 0))],
      undefined,
      undefined,
      (f) => failures.push(f),
    );
    expect(events.map((e) => [e.project, e.level])).toEqual([["other", "critical"]]);
    expect(failures.map((f) => [f.stage, f.rule.id])).toEqual([["evaluate", rule.id]]);
    expect(m.states.get(`${rule.id} ${field}`)).toBe("{not json");
  });

  it("a row whose windows throw is told (stage samples); the batch's other rows fire", async () => {
    const m = memoryStore();
    const failures: SeriesFailure[] = [];
    const events = await evaluateBatch(
      m.store,
      "t1",
      [rule, other],
      [row(95, 0), of("other", row(97, 0))],
      undefined,
      // acme's row (50 remaining) is one the windows' derivation throws on.
      (source) => {
        if (source.limits.requests_remaining === 50 && source.provider === "openai")
          throw new RangeError("Invalid time value");
        return deriveWindows(source);
      },
      (f) => failures.push(f),
    );
    expect(events.map((e) => [e.project, e.level])).toEqual([["other", "critical"]]);
    expect(failures.map((f) => [f.stage, f.rule.id])).toEqual([["samples", rule.id]]);
  });
});

describe("pools", () => {
  // Rows of a pool: `label` is the client's `pool` field; `account` the edge's keyed hash.
  const pooled = (
    usedPct: number,
    i: number,
    app: string,
    by: { label?: string; account?: string },
  ) => {
    const r = row(usedPct, i, { app, ...(by.label ? { pool: by.label } : {}) });
    if (by.account)
      r[REPORT_COLUMNS.indexOf("account" as (typeof REPORT_COLUMNS)[number])] = by.account;
    return r;
  };

  it("three member apps of a label pool are one series: one warning, one resolve, naming the pool", async () => {
    const { store, states } = memoryStore();
    const rows = [
      pooled(75, 0, "chat", { label: "openai-prod" }),
      pooled(76, 1, "agent", { label: "openai-prod" }),
      pooled(77, 2, "rag", { label: "openai-prod" }),
      pooled(20, 3, "agent", { label: "openai-prod" }),
      pooled(21, 4, "rag", { label: "openai-prod" }),
    ];
    const events = await evaluateBatch(store, "p1", [rule], rows);
    expect(levels(events)).toEqual(["warning", "resolved"]);
    expect(events[0]).toMatchObject({ app: "chat", pool_label: "openai-prod" });
    expect(events[1]).toMatchObject({ app: "agent", pool_label: "openai-prod" });
    expect(events[0]?.pool).toMatch(/^[0-9a-f]{12}$/);
    expect(events[1]?.pool).toBe(events[0]?.pool);
    expect(states.size).toBe(1);
  });

  it("an account pool names no label; a pool and an app of the same name are apart", async () => {
    const { store, states } = memoryStore();
    const hash = "a".repeat(32);
    const events = await evaluateBatch(
      store,
      "p2",
      [rule],
      [
        pooled(75, 0, "chat", { account: hash }),
        pooled(75, 1, "agent", { account: hash }),
        // An app spelt like the pool's state key: its own series.
        row(75, 2, { app: JSON.stringify(["pool", "x"]) }),
      ],
    );
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({ app: "chat", pool_label: null });
    expect(events[0]?.pool).toMatch(/^[0-9a-f]{12}$/);
    expect(events[1]?.pool).toBeUndefined();
    expect(JSON.stringify(events)).not.toContain(hash);
    expect(states.size).toBe(2);
  });

  it("a rule on one member app watches the pool through that app's reports", async () => {
    const { store } = memoryStore();
    const chatOnly = { ...rule, id: "alr_chat", app: "chat" };
    const events = await evaluateBatch(
      store,
      "p3",
      [chatOnly],
      [
        pooled(75, 0, "agent", { label: "openai-prod" }),
        pooled(76, 1, "chat", { label: "openai-prod" }),
      ],
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ app: "chat", pool_label: "openai-prod" });
  });
});

describe("a pool that cannot be read", () => {
  it("is told (stage samples) for its row; the batch's other rows fire", async () => {
    const { store } = memoryStore();
    const bad = row(75, 0, { app: "chat" });
    // A row of a job no edge made: its account a value that cannot become text.
    bad[REPORT_COLUMNS.indexOf("account" as (typeof REPORT_COLUMNS)[number])] = Object.create(
      null,
    ) as never;
    const failures: SeriesFailure[] = [];
    const events = await evaluateBatch(
      store,
      "p4",
      [rule],
      [bad, row(75, 1, { app: "agent" })],
      () => {},
      undefined,
      (f) => failures.push(f),
    );
    expect(failures.map((f) => [f.stage, f.series.app])).toEqual([["samples", "chat"]]);
    expect(events.map((e) => e.app)).toEqual(["agent"]);
  });
});
