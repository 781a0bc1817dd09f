import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it, vi } from "vitest";
import { timestampMsOf } from "../../src/alerts/usage.js";
import { addCounts, type HotCounts, pruneCounts } from "../../src/alerts/counted-windows.js";
import { type HotSeries, hotFigures, hotUpdates } from "../../src/headroom/hot-series.js";
import { createHotStore, hotKeys } from "../../src/headroom/hot-store.js";
import {
  REPORT_COLUMNS,
  type ReportBody,
  type ReportRow,
  toRecord,
  toRow,
} from "../../src/report/report-schema.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { mergePointsReference, type Point, pointOrder } from "../helpers/hot-points-reference.js";

// The hot headroom's store on a real Redis: batches merged in any order give the newest
// figures; a redelivered batch changes nothing; a hint moves last_seen only; points are bounded;
// a series not written for the TTL is dropped; the cap refuses new series, not known ones.

const redis = new Redis(inject("redisUrl"));
afterAll(() => redis.quit());

const T0 = Date.UTC(2030, 0, 1);
let n = 0;

function row(
  app: string,
  t: number,
  requests: number | null,
  credits: number | null = null,
): ReportRow {
  n += 1;
  const body = {
    app,
    provider: "openai",
    model: "gpt-4o",
    timestamp: t,
    limits: {
      requests_limit: requests === null ? null : 100,
      requests_remaining: requests,
      tokens_limit: null,
      tokens_remaining: null,
      reset_requests_ms: requests === null ? null : 60_000,
      reset_tokens_ms: null,
    },
    credits:
      credits === null
        ? null
        : { credits_limit: 50, credits_remaining: credits, request_cost: null },
  } as ReportBody;
  const id = `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
  return toRow(toRecord(body, { reportId: id, projectId: "p", keyId: "k", receivedAt: t }));
}

function setup(opts: { cap?: number; ttlMs?: number } = {}) {
  let now = T0;
  const prefix = `{hot-${uniqueId()}}`;
  const store = createHotStore(redis, prefix, {
    maxSeriesPerProject: opts.cap ?? 100,
    ttlMs: opts.ttlMs ?? 86_400_000,
    now: () => now,
  });
  return {
    store,
    keys: hotKeys(prefix),
    at: (t: number) => {
      now = t;
    },
    async view(app: string) {
      const kept = await redis.hgetall(hotKeys(prefix).series("p"));
      const field = JSON.stringify(["openai", "gpt-4o", app]);
      const json = kept[field];
      return json === undefined ? undefined : hotFigures(field, JSON.parse(json), 0);
    },
  };
}

describe("hot headroom store", () => {
  it("keeps the newest figures whatever order batches arrive in, and repeats change nothing", async () => {
    const h = setup();
    const a = [row("x", T0 + 1_000, 90), row("x", T0 + 5_000, 70, 40)];
    const b = [row("x", T0 + 3_000, 80), row("x", T0 + 9_000, null)];
    await h.store.write(hotUpdates(b));
    await h.store.write(hotUpdates(a));
    const once = await h.view("x");
    await h.store.write(hotUpdates(a));
    await h.store.write(hotUpdates(b));
    expect(await h.view("x")).toEqual(once);
    expect(once?.latest).toMatchObject({
      lastSeen: T0 + 9_000,
      limitsAt: T0 + 5_000,
      creditsAt: T0 + 5_000,
      requests: { limit: 100, remaining: 70, resetMs: 60_000 },
      credits: { limit: 50, remaining: 40 },
    });
    expect(once?.recent.requests).toEqual([
      [T0 + 1_000, 90],
      [T0 + 3_000, 80],
      [T0 + 5_000, 70],
    ]);
    expect(once?.recent.credits).toEqual([[T0 + 5_000, 40]]);
  });

  it("keeps a bounded number of recent points, within the burn rate's window", async () => {
    const h = setup();
    const rows = Array.from({ length: 100 }, (_, i) => row("y", T0 + i * 2_000, 1_000 - i));
    await h.store.write(hotUpdates(rows));
    const points = (await h.view("y"))?.recent.requests ?? [];
    expect(points).toHaveLength(16);
    expect(points.at(-1)).toEqual([T0 + 99 * 2_000, 901]);
    // A report 10 minutes later: the points before its 5-minute window go.
    await h.store.write(hotUpdates([row("y", T0 + 99 * 2_000 + 600_000, 500)]));
    expect((await h.view("y"))?.recent.requests).toEqual([[T0 + 99 * 2_000 + 600_000, 500]]);
  });

  it("drops a series not written for the TTL, and refuses new series over the cap", async () => {
    const h = setup({ cap: 2, ttlMs: 3_600_000 });
    await h.store.write(hotUpdates([row("a", T0, 10)]));
    h.at(T0 + 1_800_000);
    await h.store.write(hotUpdates([row("b", T0 + 1_800_000, 10)]));
    expect(await h.store.write(hotUpdates([row("c", T0 + 1_800_000, 10)]))).toBe(1);
    // A known series is still written at the cap.
    expect(await h.store.write(hotUpdates([row("b", T0 + 1_900_000, 5)]))).toBe(0);
    expect((await h.view("b"))?.latest.requests.remaining).toBe(5);
    // An hour after its last write, `a` is dropped, and `c` gets its place.
    h.at(T0 + 3_600_001);
    expect(await h.store.write(hotUpdates([row("c", T0 + 3_600_001, 10)]))).toBe(0);
    expect(await h.view("a")).toBeUndefined();
    expect(Object.keys(await redis.hgetall(h.keys.series("p")))).toHaveLength(2);
  });

  it("reads a project as absent until it is refilled, then whole", async () => {
    const h = setup();
    await h.store.write(hotUpdates([row("a", T0, 10)]));
    expect(await h.store.read("p")).toBeNull();
    await h.store.refill("p", hotUpdates([row("z", T0, 3)]).get("p") ?? new Map());
    expect([...((await h.store.read("p"))?.keys() ?? [])].sort()).toEqual([
      JSON.stringify(["openai", "gpt-4o", "a"]),
      JSON.stringify(["openai", "gpt-4o", "z"]),
    ]);
  });

  it("a write and a refill at once: the refill merges again what the write changed, then is whole", async () => {
    const h = setup();
    const refill = hotUpdates([row("a", T0, 10), row("z", T0, 3)]).get("p") ?? new Map();
    // The write reads and commits first (one connection: in order); the refill finds a changed.
    await Promise.all([
      h.store.write(hotUpdates([row("a", T0 + 1_000, 9)])),
      h.store.refill("p", refill),
    ]);
    expect((await h.view("a"))?.recent.requests).toEqual([
      [T0, 10],
      [T0 + 1_000, 9],
    ]);
    expect((await h.view("z"))?.recent.requests).toEqual([[T0, 3]]);
    expect((await h.store.snapshot("p", null)).version).not.toBeNull();
  });

  it("snapshots the version with the copy, and the version alone for a reader holding it", async () => {
    const h = setup();
    await h.store.write(hotUpdates([row("a", T0, 10)]));
    // Not whole until refilled: no version, no copy.
    expect(await h.store.snapshot("p", null)).toEqual({ version: null });
    await h.store.refill("p", new Map());
    const first = await h.store.snapshot("p", null);
    expect(first.version).toBe(String(T0));
    expect(first.series).toEqual(await h.store.read("p"));
    // The reader's answer is current: the version alone.
    expect(await h.store.snapshot("p", first.version)).toEqual({ version: first.version });
    // A write moves the version on, and the reader holding the old one gets the copy again.
    await h.store.write(hotUpdates([row("a", T0 + 1_000, 9)]));
    const next = await h.store.snapshot("p", first.version);
    expect(next.version).not.toBe(first.version);
    expect(next.series).toEqual(await h.store.read("p"));
    expect(
      hotFigures(
        JSON.stringify(["openai", "gpt-4o", "a"]),
        next.series?.values().next().value as HotSeries,
        0,
      ).latest.requests.remaining,
    ).toBe(9);
  });

  it("merges points as one sort of their union would, in order or not", async () => {
    const point = fc.tuple(
      fc.integer({ min: 0, max: 600_000 }).map((t) => T0 + t - (t % 250)),
      fc.integer({ min: 0, max: 30 }).map(String),
    );
    const list = fc.array(point, { minLength: 1, maxLength: 60 });
    await fc.assert(
      fc.asyncProperty(list, list, fc.boolean(), async (first, second, sorted) => {
        const h = setup();
        const series = (points: Point[]): Map<string, Map<string, HotSeries>> => {
          const ps = sorted ? [...points].sort(pointOrder) : points;
          const ls = Math.max(...ps.map(([t]) => t));
          const field = JSON.stringify(["openai", "gpt-4o", "m"]);
          return new Map([["p", new Map([[field, { ls, p: { requests: ps } }]])]]);
        };
        await h.store.write(series(first));
        await h.store.write(series(second));
        const kept = Object.values(await redis.hgetall(h.keys.series("p")));
        const stored = JSON.parse(kept[0] as string) as HotSeries;
        expect(stored.p.requests).toEqual(
          mergePointsReference(mergePointsReference([], first), second),
        );
      }),
      { numRuns: 200 },
    );
  });
});

describe("hot headroom store: counted use (issue 45)", () => {
  /** A call whose provider states nothing (Bedrock's), with its usage. */
  function call(t: number, input: number): ReportRow {
    n += 1;
    const id = `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
    return toRow(
      toRecord(
        {
          app: "x",
          provider: "bedrock",
          model: "claude",
          timestamp: t,
          limits: {
            requests_limit: null,
            requests_remaining: null,
            tokens_limit: null,
            tokens_remaining: null,
            reset_requests_ms: null,
            reset_tokens_ms: null,
          },
          credits: null,
          usage: { input_tokens: input, output_tokens: 1, cached_tokens: null },
        },
        { reportId: id, projectId: "p", keyId: "k", receivedAt: t },
      ),
    );
  }
  const counts = async (prefix: string) => {
    const json = await redis.hget(
      hotKeys(prefix).series("p"),
      JSON.stringify(["bedrock", "claude", "x"]),
    );
    return json === null ? undefined : (JSON.parse(json) as HotSeries).k;
  };

  const Y = JSON.stringify(["bedrock", "claude", "y"]);
  const MINUTE = `m:${Math.floor(T0 / 60_000) * 60_000}`;
  /** `r` as a call of app y. */
  const appY = (r: ReportRow) => {
    r[REPORT_COLUMNS.indexOf("app")] = "y";
    return r;
  };
  /** A store keeping a month, its clock at T0 until `at` moves it, and app y's counts in it. */
  function countingStore() {
    const prefix = `{hot-${uniqueId()}}`;
    const keys = hotKeys(prefix);
    let now = T0;
    const store = createHotStore(redis, prefix, {
      maxSeriesPerProject: 100,
      ttlMs: 30 * 86_400_000,
      now: () => now,
    });
    const y = async () =>
      (JSON.parse((await redis.hget(keys.series("p"), Y)) ?? "{}") as HotSeries).k;
    const at = (t: number) => {
      now = t;
    };
    return { prefix, keys, store, y, at };
  }

  it("adds each batch's counts once by its token, in any order, as the TypeScript merge would", async () => {
    const runs = fc.sample(
      fc.record({
        batches: fc.array(
          fc.array(
            fc.record({
              offset: fc.integer({ min: 0, max: 6 * 3_600_000 }),
              input: fc.integer({ min: 0, max: 1_000 }),
            }),
            { minLength: 1, maxLength: 5 },
          ),
          { minLength: 1, maxLength: 6 },
        ),
        order: fc.array(fc.nat(), { minLength: 1, maxLength: 12 }),
      }),
      20,
    );
    for (const run of runs) {
      let now = T0;
      const prefix = `{hot-${uniqueId()}}`;
      const store = createHotStore(redis, prefix, {
        maxSeriesPerProject: 100,
        ttlMs: 30 * 86_400_000,
        now: () => now,
      });
      const batches = run.batches.map((b, i) => ({
        token: `t${i}`,
        rows: b.map((r) => call(T0 + r.offset, r.input)),
      }));
      // Each batch once, then some again, in the run's order.
      const deliveries = [
        ...batches,
        ...run.order.map((i) => batches[i % batches.length] as (typeof batches)[number]),
      ];
      let model: HotCounts = {};
      const applied = new Set<string>();
      for (const d of deliveries) {
        const updates = hotUpdates(d.rows);
        now = Math.max(now, ...d.rows.map((r) => timestampMsOf(r)));
        await store.write(updates, d.token);
        if (!applied.has(d.token)) {
          applied.add(d.token);
          model = addCounts(model, [...(updates.get("p")?.values() ?? [])][0]?.k ?? {});
        }
        model = pruneCounts(model, now);
        expect((await counts(prefix)) ?? {}).toEqual(model);
      }
      // A refill (ClickHouse's copy, counts and all) and a write without a token add none.
      const before = await counts(prefix);
      const again = hotUpdates((batches[0] as (typeof batches)[number]).rows);
      await store.refill("p", again.get("p") ?? new Map());
      await store.write(again);
      expect(await counts(prefix)).toEqual(before);
    }
  });

  it("replaces a stored copy that does not decode as a series, and counts the batch once", async () => {
    const { prefix, keys, store } = countingStore();
    const other = (t: number) => appY(call(t, 5));
    const field = (app: string) => JSON.stringify(["bedrock", "claude", app]);
    await store.write(hotUpdates([call(T0, 1)]), "first");
    // Copies no worker wrote: not JSON, and JSON of the wrong shape.
    await redis.zadd(keys.seen("p"), T0, field("y"));
    await redis.hset(keys.series("p"), field("y"), "{not json");
    const batch = hotUpdates([call(T0 + 1_000, 2), other(T0 + 1_000)]);
    await store.write(batch, "second");
    await store.write(batch, "second");
    const minute = `m:${Math.floor(T0 / 60_000) * 60_000}`;
    expect((await counts(prefix))?.[minute]?.slice(0, 4)).toEqual([2, 5, 3, 2]);
    const y = async () =>
      JSON.parse((await redis.hget(keys.series("p"), field("y"))) ?? "{}") as HotSeries;
    expect((await y()).k?.[minute]?.slice(0, 4)).toEqual([1, 6, 5, 1]);
    await redis.hset(keys.series("p"), field("y"), JSON.stringify({ ls: "x", p: { requests: 5 } }));
    await store.write(hotUpdates([other(T0 + 2_000)]), "third");
    expect(await y()).toMatchObject({ ls: T0 + 2_000, p: {} });
    expect((await y()).k?.[minute]?.slice(0, 4)).toEqual([1, 6, 5, 1]);
  });

  it("two writes of a project at once: the later merges again what the first changed, both counted", async () => {
    const { prefix, keys, store, y } = countingStore();
    const reads = vi.spyOn(redis, "headroomHotReadBuffer");
    try {
      // Both read before either commits (one connection: in order), so the second commit finds
      // y changed and x not: it writes x, then reads and merges y again.
      await Promise.all([
        store.write(hotUpdates([appY(call(T0, 10))]), "a"),
        store.write(hotUpdates([call(T0 + 1_000, 20), appY(call(T0 + 1_000, 30))]), "b"),
      ]);
      expect(reads).toHaveBeenCalledTimes(3);
      expect(reads.mock.calls[2]?.slice(-2)).toEqual([1, Y]);
      expect((await counts(prefix))?.[MINUTE]?.slice(0, 4)).toEqual([1, 21, 20, 1]);
      expect((await y())?.[MINUTE]?.slice(0, 4)).toEqual([2, 42, 40, 2]);
      // The same batch delivered twice at once is counted once.
      reads.mockClear();
      const again = hotUpdates([call(T0 + 2_000, 100)]);
      await Promise.all([store.write(again, "c"), store.write(again, "c")]);
      expect(reads).toHaveBeenCalledTimes(3);
      expect((await counts(prefix))?.[MINUTE]?.slice(0, 4)).toEqual([2, 122, 120, 2]);
      expect((await y())?.[MINUTE]?.slice(0, 4)).toEqual([2, 42, 40, 2]);
      // A batch whose first commit wrote x but not y owes y's counts alone: delivered again
      // whole, it counts y, not x, and then nothing.
      const owing = keys.counted("d");
      await redis.set(owing, `p:${JSON.stringify([`p\0${Y}`])}`);
      const d = hotUpdates([call(T0 + 3_000, 1_000), appY(call(T0 + 3_000, 1_000))]);
      await store.write(d, "d");
      await store.write(d, "d");
      expect(await redis.get(owing)).toBe("1");
      expect((await counts(prefix))?.[MINUTE]?.slice(0, 4)).toEqual([2, 122, 120, 2]);
      expect((await y())?.[MINUTE]?.slice(0, 4)).toEqual([3, 1_043, 1_040, 3]);
    } finally {
      reads.mockRestore();
    }
  });

  it("a write read ahead: nothing written until it commits; a series written meanwhile is merged again, each batch counted once", async () => {
    const { prefix, keys, store, y, at } = countingStore();
    const reads = vi.spyOn(redis, "headroomHotReadBuffer");
    const commits = vi.spyOn(redis, "headroomHotCommit");
    try {
      const a = hotUpdates([call(T0, 10), appY(call(T0, 30))]);
      const plan = store.prepare(a, "a");
      await plan;
      expect(await redis.exists(keys.series("p"), keys.counted("a"))).toBe(0);
      // Another batch writes y between the read ahead and its commit.
      await store.write(hotUpdates([appY(call(T0 + 1_000, 20))]), "b");
      reads.mockClear();
      await store.write(a, "a", plan);
      // x was committed as read ahead; y alone was read and merged again.
      expect(reads).toHaveBeenCalledTimes(1);
      expect(reads.mock.calls[0]?.slice(-2)).toEqual([1, Y]);
      expect((await counts(prefix))?.[MINUTE]?.slice(0, 4)).toEqual([1, 11, 10, 1]);
      expect((await y())?.[MINUTE]?.slice(0, 4)).toEqual([2, 52, 50, 2]);
      // Read ahead, then the batch delivered again and written whole meanwhile: its counts once.
      const c = hotUpdates([call(T0 + 2_000, 100)]);
      const early = store.prepare(c, "c");
      await early;
      await store.write(c, "c");
      await store.write(c, "c", early);
      expect((await counts(prefix))?.[MINUTE]?.slice(0, 4)).toEqual([2, 112, 110, 2]);
      // A plan of other updates is not used: the write reads its own, and commits once.
      reads.mockClear();
      commits.mockClear();
      await store.write(hotUpdates([call(T0 + 3_000, 1)]), "d", early);
      expect(reads).toHaveBeenCalledTimes(1);
      expect(commits).toHaveBeenCalledTimes(1);
      expect((await counts(prefix))?.[MINUTE]?.slice(0, 4)).toEqual([3, 114, 111, 3]);
      // A plan is committed up to 10 s after its read, not later (its time is the series').
      const e = hotUpdates([call(T0 + 4_000, 2)]);
      const young = store.prepare(e, "e");
      await young;
      at(T0 + 10_000);
      reads.mockClear();
      await store.write(e, "e", young);
      expect(reads).not.toHaveBeenCalled();
      const f = hotUpdates([call(T0 + 5_000, 3)]);
      const old = store.prepare(f, "f");
      await old;
      at(T0 + 20_001);
      reads.mockClear();
      await store.write(f, "f", old);
      expect(reads).toHaveBeenCalledTimes(1);
      expect(await redis.zscore(keys.seen("p"), JSON.stringify(["bedrock", "claude", "x"]))).toBe(
        String(T0 + 20_001),
      );
      // A read ahead still under way as its write starts is aged once it is in hand: 20 s on,
      // it is read again (the write's own clock at its start would have taken it).
      const g = hotUpdates([call(T0 + 6_000, 4)]);
      const made = store.prepare(g, "g");
      await made;
      let release = () => {};
      const inHand = new Promise<void>((resolve) => {
        release = resolve;
      }).then(() => made);
      reads.mockClear();
      const writing = store.write(g, "g", inHand);
      at(T0 + 40_002);
      release();
      await writing;
      expect(reads).toHaveBeenCalledTimes(1);
      expect(await redis.zscore(keys.seen("p"), JSON.stringify(["bedrock", "claude", "x"]))).toBe(
        String(T0 + 40_002),
      );
    } finally {
      reads.mockRestore();
      commits.mockRestore();
    }
  });

  it("keeps the 16 nearest minutes ahead of its clock from reports dated ahead, none further", async () => {
    const prefix = `{hot-${uniqueId()}}`;
    const store = createHotStore(redis, prefix, {
      maxSeriesPerProject: 100,
      ttlMs: 30 * 86_400_000,
      now: () => T0,
    });
    // A report dated each of the next 40 minutes (timestamps may be up to a day ahead).
    const ahead = Array.from({ length: 40 }, (_, i) => T0 + (i + 1) * 60_000);
    await store.write(hotUpdates(ahead.map((t) => call(t, 1))), "t-ahead");
    const minutes = Object.keys((await counts(prefix)) ?? {})
      .filter((key) => key.startsWith("m:"))
      .map((key) => Number(key.slice(2)))
      .sort((a, b) => a - b);
    const minute = (t: number) => Math.floor(t / 60_000) * 60_000;
    expect(minutes).toEqual(ahead.slice(0, 16).map(minute));
  });
});
