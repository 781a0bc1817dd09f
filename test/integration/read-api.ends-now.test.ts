import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { createLogger } from "../../src/lib/logger.js";
import { eventually } from "../helpers/eventually.js";
import { type ReadStack, startReadStack } from "../helpers/read-stack.js";

// A range that ends now (`last`, or no from/to) is one query however the clock turns: its answer
// is shared by what was asked and refreshed behind the held one, so a minute's turn does not make
// every dashboard miss the cache at once (issue 48). Reports through the real edge and worker;
// the API's clock is moved past a minute's turn, its caches run on the real clock.

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
let s: ReadStack;
const apis: Api[] = [];

const report = (t: number, remaining: number) => ({
  provider: "openai",
  model: "m1",
  timestamp: new Date(t).toISOString(),
  limits: {
    requests_limit: 1_000,
    requests_remaining: remaining,
    tokens_limit: null,
    tokens_remaining: null,
    reset_requests_ms: 60_000,
    reset_tokens_ms: null,
  },
});

/** A read API whose clock is `Date.now() + offset.ms`; answers fresh 300 ms, then held stale. */
async function api(offset: { ms: number }): Promise<Api> {
  const a = await createApi(
    { ...s.p.config, READ_CACHE_TTL_MS: 300, READ_CACHE_STALE_MS: 600_000 },
    createLogger("silent", "test"),
    { clickhouse: s.p.client, now: () => Date.now() + offset.ms },
  );
  apis.push(a);
  return a;
}

async function get(a: Api, url: string, key: string) {
  const res = await a.app.inject({
    method: "GET",
    url,
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
  return res.json() as { from?: string; to?: string; items?: { id: string }[] };
}

beforeAll(async () => {
  s = await startReadStack();
});

afterAll(async () => {
  for (const a of apis) await a.close();
  await s?.close();
});

describe("a range that ends now", () => {
  it("is answered from the held answer when the minute turns, then refreshed behind it", async () => {
    const k = await s.project();
    const offset = { ms: 0 };
    const a = await api(offset);
    const [first] = await s.send(k.report, [report(Date.now() - 5 * MINUTE, 900)]);
    await s.stored(k.project, 1);
    const urls = {
      usage: "/api/v1/usage?last=1h&group_by=provider,model",
      spend: "/api/v1/spend?last=1h",
      reports: "/api/v1/reports?last=1h&limit=20",
      events: "/api/v1/alerts/events?last=1h&limit=100",
    };
    const before = {
      usage: await get(a, urls.usage, k.read),
      spend: await get(a, urls.spend, k.read),
      reports: await get(a, urls.reports, k.read),
      events: await get(a, urls.events, k.read),
    };
    expect(before.reports.items?.map((r) => r.id)).toEqual([first]);
    expect(before.events.items).toEqual([]);

    // Two minutes on (the API's clock), and a report more: the same queries are answered at
    // once with the answers held (their ranges as they were made), not as new queries.
    offset.ms = 2 * MINUTE;
    const [second] = await s.send(k.report, [report(Date.now(), 800)]);
    await s.stored(k.project, 2);
    expect(await get(a, urls.usage, k.read)).toEqual(before.usage);
    expect(await get(a, urls.spend, k.read)).toEqual(before.spend);
    expect(await get(a, urls.reports, k.read)).toEqual(before.reports);
    expect(await get(a, urls.events, k.read)).toEqual(before.events);

    // Then refreshed behind the held answers: the new range, the new report.
    const movedTo = (x: { to?: string }) =>
      Date.parse(x.to ?? "") - Date.parse(before.spend.to ?? "");
    await eventually(async () => {
      // Two minutes on, or three if the real clock's minute turned meanwhile.
      expect(movedTo(await get(a, urls.spend, k.read))).toBeGreaterThanOrEqual(2 * MINUTE);
      expect(movedTo(await get(a, urls.usage, k.read))).toBeGreaterThanOrEqual(2 * MINUTE);
      expect((await get(a, urls.reports, k.read)).items?.map((r) => r.id)).toEqual([second, first]);
    });
  });

  it("with from/to, is the range asked: a minute later is another query", async () => {
    const k = await s.project();
    const offset = { ms: 0 };
    const a = await api(offset);
    await s.send(k.report, [report(Date.now() - 5 * MINUTE, 900)]);
    await s.stored(k.project, 1);
    const range = (now: number) =>
      `from=${new Date(now - HOUR).toISOString()}&to=${new Date(now).toISOString()}`;
    const t = Math.ceil(Date.now() / MINUTE) * MINUTE;
    const one = await get(a, `/api/v1/spend?${range(t)}`, k.read);
    const two = await get(a, `/api/v1/spend?${range(t + MINUTE)}`, k.read);
    expect(Date.parse(two.to ?? "") - Date.parse(one.to ?? "")).toBe(MINUTE);
  });

  it("refuses last with from or to, and a span it cannot read", async () => {
    const k = await s.project();
    const a = await api({ ms: 0 });
    const refused = async (url: string, message: RegExp) => {
      const res = await a.app.inject({
        method: "GET",
        url,
        headers: { authorization: `Bearer ${k.read}` },
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: "invalid_query" });
      expect((res.json() as { message: string }).message).toMatch(message);
    };
    const from = new Date(Date.now() - HOUR).toISOString();
    for (const path of ["usage", "spend", "reports", "alerts/events"]) {
      await refused(`/api/v1/${path}?last=1h&from=${from}`, /give either last or from\/to/);
      await refused(`/api/v1/${path}?last=401d`, /last: at most 400 days/);
      await refused(`/api/v1/${path}?last=1w`, /last: expected a span such as 15m, 24h or 7d/);
    }
    // Minute windows over 8 days is over their cap, as with from/to.
    await refused("/api/v1/usage?last=8d&window=minute", /minute windows cover at most 7 days/);
  });
});
