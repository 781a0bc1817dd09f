import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, expect, inject, it } from "vitest";
import { type HotSeries, hotFigures, hotUpdates } from "../../src/headroom/hot-series.js";
import { createHotStore, hotKeys } from "../../src/headroom/hot-store.js";
import { poolsOf } from "../../src/headroom/pool-view.js";
import { type ReportBody, toRecord, toRow } from "../../src/report/report-schema.js";
import { uniqueId } from "../helpers/edge-fixture.js";

// Pools against a small reference model (docs/pools.md), through the hot store's script on a real
// Redis: reports of several apps, naming accounts, labels or neither, written in batches that
// arrive in any order (idle members included: an app may report only early). Each app is in the
// pool of its newest report; each pool's window shows the newest report of any member.

const redis = new Redis(inject("redisUrl"));
afterAll(() => redis.quit());
const T0 = Date.UTC(2030, 0, 1);

interface Sent {
  app: string;
  t: number;
  account: string | null;
  label: string | null;
  remaining: number;
}

const sent = fc.record({
  app: fc.constantFrom("a", "b", "c", "d"),
  t: fc.integer({ min: 0, max: 600_000 }).map((x) => T0 + x),
  account: fc.constantFrom("acc1", "acc2", null),
  label: fc.constantFrom("L", null),
  remaining: fc.integer({ min: 0, max: 100 }),
});

function rowOf(r: Sent, i: number) {
  const body = {
    app: r.app,
    provider: "openai",
    model: "gpt-4o",
    timestamp: r.t,
    pool: r.label,
    limits: {
      requests_limit: 100,
      requests_remaining: r.remaining,
      tokens_limit: null,
      tokens_remaining: null,
      reset_requests_ms: 60_000,
      reset_tokens_ms: null,
    },
    credits: null,
  } as ReportBody;
  const id = `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
  return {
    id,
    row: toRow(
      toRecord(
        body,
        { reportId: id, projectId: "p", keyId: `k-${r.app}`, receivedAt: r.t },
        { headers: null, error: null, account: r.account },
      ),
    ),
  };
}

/** The reference: each app's pool by its newest report; each pool's newest report's remaining. */
function reference(reports: (Sent & { id: string })[]) {
  const newer = (x: { t: number; id: string }, y: { t: number; id: string }) =>
    x.t > y.t || (x.t === y.t && x.id > y.id);
  const newestOf = new Map<string, Sent & { id: string }>();
  for (const r of reports) {
    const kept = newestOf.get(r.app);
    if (!kept || newer(r, kept)) newestOf.set(r.app, r);
  }
  const poolOf = (app: string) => {
    const r = newestOf.get(app) as Sent;
    return r.account ? `a:${r.account}` : r.label ? `l:${r.label}` : `app:${app}`;
  };
  const pools = new Map<string, { members: string[]; newest: Sent & { id: string } }>();
  for (const r of reports) {
    const key = poolOf(r.app);
    const p = pools.get(key);
    if (!p) pools.set(key, { members: [r.app], newest: r });
    else {
      if (!p.members.includes(r.app)) p.members.push(r.app);
      if (newer(r, p.newest)) p.newest = r;
    }
  }
  return [...pools.values()]
    .map((p) => ({ members: p.members.sort().join(","), remaining: p.newest.remaining }))
    .sort((x, y) => (x.members < y.members ? -1 : 1));
}

it("shows each pool's newest figure and members, whatever order batches arrive in", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(sent, { minLength: 1, maxLength: 40 }),
      fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 10 }),
      fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
      async (reports, cuts, order) => {
        const prefix = `{pools-${uniqueId()}}`;
        const store = createHotStore(redis, prefix, {
          maxSeriesPerProject: 100,
          ttlMs: 86_400_000,
          now: () => T0 + 700_000,
        });
        const rows = reports.map((r, i) => ({ ...r, ...rowOf(r, i + 1) }));
        // Batches of the sizes `cuts` gives (the rest in one), written in a shuffled order.
        const batches: (typeof rows)[] = [];
        let at = 0;
        for (const size of cuts) {
          if (at >= rows.length) break;
          batches.push(rows.slice(at, at + size));
          at += size;
        }
        if (at < rows.length) batches.push(rows.slice(at));
        const keys = batches.map((b) => [order.next().value as number, b] as const);
        keys.sort((x, y) => x[0] - y[0]);
        for (const [, batch] of keys) await store.write(hotUpdates(batch.map((b) => b.row)));

        const kept = await redis.hgetall(hotKeys(prefix).series("p"));
        const series = new Map<string, HotSeries>(
          Object.entries(kept).map(([f, json]) => [f, JSON.parse(json) as HotSeries]),
        );
        const seen = poolsOf(series)
          .map((p) => {
            const { latest } = hotFigures(p.field, p.series, 0);
            const w = latest.windows?.find((x) => x.dimension === "requests");
            return {
              members: p.members
                .map((m) => m.app)
                .sort()
                .join(","),
              remaining: w?.remaining ?? latest.requests.remaining,
            };
          })
          .sort((x, y) => (x.members < y.members ? -1 : 1));
        expect(seen).toEqual(reference(rows));
        await redis.del(hotKeys(prefix).series("p"), hotKeys(prefix).seen("p"));
      },
    ),
    { numRuns: 60 },
  );
});
