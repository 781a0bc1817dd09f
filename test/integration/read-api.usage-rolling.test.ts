import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createLogger } from "../../src/lib/logger.js";
import { eventually } from "../helpers/eventually.js";
import { normalise, RAW_ROWS_SQL, type RawRow, usageOracle } from "../helpers/read-oracle.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// A polled /usage over the last 24 h is refreshed by its newest buckets and the older ones whose
// count of reports moved, and whole every READ_USAGE_FULL_REFRESH_MS (usage-rolling.ts): reports
// sent through the real edge and stored by the real worker, answers against the oracle over
// `reports_v`. A report timestamped now and one timestamped hours ago both show at the next
// refresh.

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const URL = "/api/v1/usage?window=minute&group_by=provider,model";
let s: ReadStack;
const apis: Api[] = [];

const iso = (t: number) => new Date(t).toISOString();
const report = (provider: string, t: number, remaining: number) => ({
  provider,
  model: "m1",
  timestamp: iso(t),
  limits: {
    requests_limit: 1_000,
    requests_remaining: remaining,
    tokens_limit: null,
    tokens_remaining: null,
    reset_requests_ms: 60_000,
    reset_tokens_ms: null,
  },
});

/** A read API on the stack's stores with its own settings; closed after the file. */
async function api(fullRefreshMs: number, now?: () => number): Promise<Api> {
  const a = await createApi(
    // The cache's TTL is short and nothing stale is served: each poll after it refreshes.
    {
      ...s.p.config,
      READ_CACHE_TTL_MS: 100,
      READ_CACHE_STALE_MS: 0,
      READ_USAGE_FULL_REFRESH_MS: fullRefreshMs,
    },
    createLogger("silent", "test"),
    { clickhouse: s.p.client, now },
  );
  apis.push(a);
  return a;
}

async function usage(a: Api, key: string) {
  const res = await a.app.inject({
    method: "GET",
    url: URL,
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { from: string; to: string; points: unknown[] };
}

async function rowsOf(k: ProjectKeys): Promise<RawRow[]> {
  return normalise(await s.sql(RAW_ROWS_SQL(s.db), { project: k.project }));
}

/** The oracle over `rows` for the answer's own range. */
const expected = (rows: RawRow[], answer: { from: string; to: string }) =>
  usageOracle(rows, {
    from: Date.parse(answer.from),
    to: Date.parse(answer.to),
    window: "minute",
    groups: ["provider", "model"],
  });

beforeAll(async () => {
  s = await startReadStack();
});

afterAll(async () => {
  for (const a of apis) await a.close();
  await s?.close();
});

describe("/api/v1/usage over the last 24 h, refreshed by its newest buckets", () => {
  it("shows a report timestamped now and a backdated one at the next refresh", async () => {
    const k = await s.project();
    const rolling = await api(HOUR);
    const now = Date.now();
    const first = [
      report("openai", now - 3 * HOUR, 900),
      report("openai", now - 10 * MINUTE, 800),
      report("anthropic", now - 2 * MINUTE, 700),
    ];
    await s.send(k.report, first);
    await s.stored(k.project, first.length);
    const before = await rowsOf(k);
    const a0 = await usage(rolling, k.read);
    expect(a0.points).toEqual(expected(before, a0));

    // Now: a report in the current minute, one two hours back, and a new series, now.
    const t = Date.now();
    const recent = [report("openai", t, 600), report("groq", t, 500)];
    const backdated = report("anthropic", t - 2 * HOUR, 100);
    await s.send(k.report, [...recent, backdated]);
    await s.stored(k.project, first.length + 3);
    const all = await rowsOf(k);
    // The rolling API (no whole refresh within the hour) shows the backdated report's bucket
    // too, found by its count, as an API that reads the whole range each time does.
    await eventually(async () => {
      const a = await usage(rolling, k.read);
      expect(a.points).toEqual(expected(all, a));
    });
    const a1 = await usage(await api(0), k.read);
    expect(a1.points).toEqual(expected(all, a1));
  });

  it("reads the whole range again every READ_USAGE_FULL_REFRESH_MS", async () => {
    // A window written into an old bucket without a report (as `headroom rederive-windows`
    // writes one) moves no count: only a whole refresh reads it.
    const k = await s.project();
    const now = Date.now();
    const old = now - 5 * HOUR;
    await s.send(k.report, [report("openai", now - MINUTE, 900), report("openai", old, 800)]);
    await s.stored(k.project, 2);
    const dims = (a: { points: unknown[] }) =>
      (a.points as { bucket: string; used_pct_by_dimension: Record<string, number> }[]).find(
        (p) => Date.parse(p.bucket) === Math.floor(old / MINUTE) * MINUTE,
      )?.used_pct_by_dimension;
    const rederive = (dimension: string) =>
      s.p.client.command({
        query: `INSERT INTO ${s.db}.report_windows_minute (project_id, app, provider, model, bucket,
          dimension, \`window\`, limit_max, remaining_min)
        SELECT {project:String}, '', 'openai', 'm1', toStartOfMinute(fromUnixTimestamp64Milli({t:Int64}, 'UTC')),
          {dimension:String}, '', 100, 25`,
        query_params: { project: k.project, t: old, dimension },
      });
    const hourly = await api(HOUR);
    const often = await api(1_000);
    await usage(hourly, k.read);
    await usage(often, k.read);
    await rederive("rederived");
    await eventually(async () => {
      expect(dims(await usage(often, k.read))).toHaveProperty("rederived", 75);
    });
    expect(dims(await usage(hourly, k.read))).not.toHaveProperty("rederived");
  });

  it("keeps the buckets between an old answer's end and the newest ones", async () => {
    // An answer older than the recent window (kept while nobody asked): what came after its
    // end is read again, not only the newest minutes.
    const k = await s.project();
    let t = Date.now() - 30 * MINUTE;
    const a = await api(HOUR, () => t);
    await usage(a, k.read);
    const sent = [
      report("openai", Date.now() - 20 * MINUTE, 500),
      report("openai", Date.now(), 400),
    ];
    await s.send(k.report, sent);
    await s.stored(k.project, 2);
    t = Date.now();
    const answer = await usage(a, k.read);
    expect(answer.points).toEqual(expected(await rowsOf(k), answer));
    expect(answer.points).toHaveLength(2);
    // Its CSV is the CSV of the same range read whole.
    const csv = async (url: string) => {
      const res = await a.app.inject({
        method: "GET",
        url,
        headers: { authorization: `Bearer ${k.read}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.body;
    };
    const range = `from=${encodeURIComponent(answer.from)}&to=${encodeURIComponent(answer.to)}`;
    const rolled = await csv(`${URL}&format=csv`);
    expect(rolled.trim().split("\r\n")).toHaveLength(3);
    expect(rolled).toBe(await csv(`${URL}&${range}&format=csv`));
  });
});
