import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hotKeys } from "../../src/headroom/hot-store.js";
import { eventually } from "../helpers/eventually.js";
import { DRAINED } from "../helpers/pipeline.js";
import {
  latestOracle,
  normalise,
  RAW_ROWS_SQL,
  type RawRow,
  usedPctOf,
} from "../helpers/read-oracle.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// /api/v1/headroom from the hot copy the ingest worker keeps in Redis: its figures against the
// raw rows of reports_v, whether the worker wrote the copy or a read refilled it from ClickHouse
// after Redis lost it; a provider hint never blanks figures; new reports show without a refill;
// and a flood of app names never grows a project's copy past its cap.

const CAP = 5;
let s: ReadStack;
const keys = () => hotKeys(s.p.config.QUEUE_PREFIX);
const iso = (t: number) => new Date(t).toISOString();

const limits = (requests: number | null, tokens: number | null = null) => ({
  requests_limit: requests === null ? null : 200,
  requests_remaining: requests,
  tokens_limit: tokens === null ? null : 10_000,
  tokens_remaining: tokens,
  reset_requests_ms: requests === null ? null : 3_600_000,
  reset_tokens_ms: tokens === null ? null : 30_000,
});
const HINT = limits(null);

function reports(now: number) {
  const at = (agoMs: number) => iso(now - agoMs);
  return [
    // Figures, then a newer provider hint: the figures stay, last_seen moves.
    {
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      timestamp: at(200_000),
      limits: limits(90, 9_000),
    },
    {
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      timestamp: at(100_000),
      limits: limits(70, 5_000),
    },
    { provider: "openai", model: "gpt-4o", app: "chat", timestamp: at(50_000), limits: HINT },
    {
      provider: "openai",
      model: "gpt-4o",
      app: "chat",
      timestamp: at(150_000),
      limits: HINT,
      credits: { credits_limit: 100, credits_remaining: 42.5, request_cost: 0.25 },
    },
    // Burning now: 100 → 80 over 110 s.
    {
      provider: "mistral",
      model: "large",
      app: "live",
      timestamp: at(120_000),
      limits: limits(100),
    },
    { provider: "mistral", model: "large", app: "live", timestamp: at(60_000), limits: limits(90) },
    { provider: "mistral", model: "large", app: "live", timestamp: at(10_000), limits: limits(80) },
    // Old, stale, and sent out of order.
    {
      provider: "anthropic",
      model: "claude",
      app: "batch",
      timestamp: at(2 * 86_400_000),
      limits: limits(10),
    },
    {
      provider: "anthropic",
      model: "claude",
      app: "batch",
      timestamp: at(3 * 86_400_000),
      limits: limits(150),
    },
    // Only hints.
    { provider: "groq", model: null, timestamp: at(30_000), limits: {} },
  ];
}

type View = Record<string, unknown> & {
  provider: string;
  model: string | null;
  app: string;
  requests: Record<string, number | string | boolean | null>;
  tokens: Record<string, number | string | boolean | null>;
  credits: Record<string, number | string | boolean | null>;
  windows?: Record<string, number | string | boolean | null>[];
};

async function headroom(k: ProjectKeys, query = ""): Promise<{ at: string; series: View[] }> {
  const res = await s.get(`/api/v1/headroom${query}`, k.read);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function expectOracle(body: { series: View[] }, rows: RawRow[]) {
  const latest = latestOracle(rows);
  expect(body.series).toHaveLength(latest.size);
  for (const v of body.series) {
    const key = JSON.stringify([v.provider, v.model ?? "", v.app]);
    const o = latest.get(key);
    expect(o, key).toBeDefined();
    if (!o) continue;
    expect(v.last_seen, key).toBe(iso(o.lastSeen));
    expect(v.reported_at, key).toBe(o.last ? iso(o.last.t) : null);
    for (const m of ["requests", "tokens"] as const) {
      const limit = o.last?.[`${m}_limit`] ?? null;
      const remaining = o.last?.[`${m}_remaining`] ?? null;
      const used = usedPctOf(limit, remaining);
      expect(v[m], `${key} ${m}`).toMatchObject({
        limit,
        remaining,
        used_pct: used === null ? null : Math.round(used * 100) / 100,
      });
    }
    expect(v.credits.remaining, key).toBe(o.credits?.credits_remaining ?? null);
  }
}

/** Every job sent so far completed: a job completes after the worker wrote it to the copy. */
async function drained() {
  await eventually(async () => expect(await s.p.jobCounts()).toStrictEqual(DRAINED), {
    timeoutMs: 20_000,
  });
}

/** The answer without its clock: two reads a moment apart agree on everything else. */
/**
 * The series without what counts down from the answer's `at` (resets_in_s, exhaustion_eta_s):
 * two answers read moments apart agree on the absolute times those come from.
 */
const figures = (body: { series: View[] }) =>
  body.series.map((v) => {
    const still = (m: View["requests"]) => {
      const { resets_in_s: _r, exhaustion_eta_s: _e, ...rest } = m;
      return rest;
    };
    return {
      ...v,
      requests: still(v.requests),
      tokens: still(v.tokens),
      credits: still(v.credits),
      // Each window's figures for the moment of the answer too (the two answers are apart).
      windows: v.windows?.map(still),
    };
  });

interface Seeded {
  k: ProjectKeys;
  /** The clock reports() was given. */
  now: number;
  rows: RawRow[];
}

/**
 * A project of the caller's own with reports() stored; its hot copy is the worker's alone.
 * `apart`: each report is in the copy before the next is sent, so every one goes through the
 * merge in Redis (sent together, they may be merged within one batch first).
 */
async function seeded(opts: { apart?: boolean } = {}): Promise<Seeded> {
  const k = await s.project();
  const now = Date.now();
  const sent = reports(now);
  if (opts.apart) {
    for (const report of sent) {
      await s.send(k.report, [report]);
      await drained();
    }
  } else {
    await s.send(k.report, sent);
    await drained();
  }
  await s.stored(k.project, sent.length);
  const rows = normalise(await s.sql(RAW_ROWS_SQL(s.db), { project: k.project }));
  // The worker wrote every series after its insert; no read has refilled anything yet.
  expect(await s.p.redis.hlen(keys().series(k.project))).toBe(4);
  expect(await s.p.redis.exists(keys().ready(k.project))).toBe(0);
  return { k, now, rows };
}

/**
 * The worker's copy as /headroom answers it, against the raw rows' newest figures: marked whole
 * by hand, so no read refills it from ClickHouse.
 */
async function fromWorker({ k, rows }: Seeded): Promise<{ at: string; series: View[] }> {
  await s.p.redis.set(keys().ready(k.project), "1");
  const body = await headroom(k);
  expectOracle(body, rows);
  return body;
}

beforeAll(async () => {
  s = await startReadStack({ READ_HOT_MAX_SERIES_PER_PROJECT: String(CAP) });
});

afterAll(async () => {
  await s?.close();
});

// Each test has projects of its own: one stack, copies that no other test touches.
describe("GET /api/v1/headroom from the hot copy", () => {
  it("as the worker wrote it equals the raw rows' newest figures", async () => {
    const seed = await seeded({ apart: true });
    const body = await fromWorker(seed);
    const live = body.series.find((v) => v.app === "live");
    expect(live?.requests.burn_per_s).toBeCloseTo(20 / 110, 4);
    // 440 s after the last report (10 s before `now`), counted down to the answer's `at`.
    const exhaustedAt = seed.now - 10_000 + 440_000;
    expect(Date.parse(String(live?.requests.exhausted_at))).toBe(exhaustedAt);
    expect(live?.requests.exhaustion_eta_s).toBeCloseTo(
      (exhaustedAt - Date.parse(body.at)) / 1000,
      1,
    );
  });

  it("keeps the figures when a newer provider hint arrives", async () => {
    const seed = await seeded();
    const { k, now } = seed;
    const body = await fromWorker(seed);
    const chat = body.series.find((v) => v.app === "chat");
    expect(chat?.last_seen).toBe(iso(now - 50_000));
    expect(chat?.reported_at).toBe(iso(now - 100_000));
    expect(chat?.requests).toMatchObject({ limit: 200, remaining: 70, used_pct: 65 });
    expect(chat?.credits).toMatchObject({ limit: 100, remaining: 42.5 });
    const groq = body.series.find((v) => v.provider === "groq");
    expect(groq?.reported_at).toBeNull();
    expect(groq?.requests.remaining).toBeNull();

    // A hint sent after the figures are in the copy: merged in Redis, not within one batch.
    const t = Date.now();
    await s.send(k.report, [
      { provider: "openai", model: "gpt-4o", app: "chat", timestamp: iso(t), limits: HINT },
    ]);
    await drained();
    const hinted = (await headroom(k, "?app=chat")).series[0];
    expect(hinted?.last_seen).toBe(iso(t));
    expect(hinted?.reported_at).toBe(iso(now - 100_000));
    expect(hinted?.requests).toMatchObject({ limit: 200, remaining: 70, used_pct: 65 });
    expect(hinted?.credits).toMatchObject({ limit: 100, remaining: 42.5 });
  });

  it("is refilled from ClickHouse after Redis lost it, with the same figures", async () => {
    const seed = await seeded();
    const { k, rows } = seed;
    const worker = await fromWorker(seed);
    const { series, seen, ready } = keys();
    await s.p.redis.del(series(k.project), seen(k.project), ready(k.project));
    const refilled = await headroom(k);
    expectOracle(refilled, rows);
    expect(figures(refilled)).toEqual(figures(worker));
    expect(await s.p.redis.exists(ready(k.project))).toBe(1);
    expect(await s.p.redis.hlen(series(k.project))).toBe(4);
  });

  it("shows a new report through the worker's write, without a refill", async () => {
    const seed = await seeded();
    const { k } = seed;
    await fromWorker(seed);
    // A series taken out of the copy by hand: a refill from ClickHouse would bring it back.
    const { series, ready } = keys();
    const groq = (await s.p.redis.hkeys(series(k.project))).find((f) => f.startsWith('["groq"'));
    expect(groq).toBeDefined();
    await s.p.redis.hdel(series(k.project), groq as string);
    const providers = async () => (await headroom(k)).series.map((v) => v.provider);
    expect(await providers()).not.toContain("groq");

    const t = Date.now();
    await s.send(k.report, [
      { provider: "openai", model: "gpt-4o", app: "chat", timestamp: iso(t), limits: limits(12) },
    ]);
    await drained();
    const chat = (await headroom(k, "?app=chat")).series[0];
    expect(chat?.reported_at).toBe(iso(t));
    expect(chat?.requests.remaining).toBe(12);
    // Nothing asked ClickHouse for the whole project again.
    expect(await providers()).not.toContain("groq");
    expect(await s.p.redis.exists(ready(k.project))).toBe(1);
  });

  it("never keeps more series of a project than its cap, however many apps report", async () => {
    const flood = await s.project();
    const now = Date.now();
    const apps =
      fc.sample(
        fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,24}$/), { minLength: 40, maxLength: 40 }),
        1,
      )[0] ?? [];
    expect(apps).toHaveLength(40);
    const sent = apps.map((app, i) => ({
      provider: "openai",
      model: "gpt-4o",
      app,
      timestamp: iso(now - i * 1_000),
      limits: limits(100 - i),
    }));
    await s.send(flood.report, sent);
    await drained();
    await s.stored(flood.project, sent.length);
    const { series, seen } = keys();
    expect(await s.p.redis.hlen(series(flood.project))).toBe(CAP);
    // The refill from ClickHouse (40 series there) is held to the cap too.
    const body = await headroom(flood);
    expect(body.series).toHaveLength(CAP);
    expect(await s.p.redis.hlen(series(flood.project))).toBe(CAP);
    expect(await s.p.redis.zcard(seen(flood.project))).toBe(CAP);
  });
});

describe("GET /api/v1/headroom refilled from ClickHouse, two projects with the same names", () => {
  // Isolation on the refill path: the ClickHouse queries behind it run only when Redis has no
  // copy, so the isolation tests that read a copy the worker wrote never reach them.
  it("shows each project only its own series and figures", async () => {
    const a = await seeded();
    const b = await s.project();
    const now = Date.now();
    // The same provider, model and app names as a's, other figures, newer; and a series of b's own.
    const sentB = [
      {
        provider: "openai",
        model: "gpt-4o",
        app: "chat",
        timestamp: iso(now - 20_000),
        limits: limits(11, 1_100),
      },
      {
        provider: "mistral",
        model: "large",
        app: "live",
        timestamp: iso(now - 5_000),
        limits: limits(33),
      },
      {
        provider: "cohere",
        model: "command",
        app: "chat",
        timestamp: iso(now - 30_000),
        limits: limits(44),
      },
    ];
    await s.send(b.report, sentB);
    await drained();
    await s.stored(b.project, sentB.length);
    const rowsB = normalise(await s.sql(RAW_ROWS_SQL(s.db), { project: b.project }));

    const { series, seen, ready } = keys();
    for (const first of [a.k, b]) {
      await s.p.redis.del(
        ...[a.k, b].flatMap((k) => [series(k.project), seen(k.project), ready(k.project)]),
      );
      // Each project refilled first in turn: neither order lets one read the other's rows.
      for (const k of first === b ? [b, a.k] : [a.k, b]) {
        const body = await headroom(k);
        expect(await s.p.redis.exists(ready(k.project)), k.project).toBe(1);
        expectOracle(body, k === b ? rowsB : a.rows);
      }
    }
    expect(await s.p.redis.hlen(series(b.project))).toBe(3);
    expect(await s.p.redis.hlen(series(a.k.project))).toBe(4);
  });
});
