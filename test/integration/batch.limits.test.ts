import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientReport, type EdgeFixture, startEdge, uniqueId } from "../helpers/edge-fixture.js";
import { notAtMonthEnd } from "../helpers/month-end.js";

// The burst limit and the monthly quota count a batch's reports, not its request: the first k
// of n pass, the others are answered rate_limited / quota_exceeded in place, and a whole-request
// 429 comes only when none can pass. Two edges share one Redis and one queue, as behind a load
// balancer.

let a: EdgeFixture;
let b: EdgeFixture;

beforeAll(async () => {
  const tag = uniqueId();
  const env = { QUEUE_PREFIX: `{t-${tag}}`, QUEUE_NAME: `reports-${tag}` };
  [a, b] = await Promise.all([startEdge({ env }), startEdge({ env })]);
});

afterAll(async () => {
  await a?.close();
  await b?.close();
});

const reports = (n: number) => Array.from({ length: n }, () => clientReport());
const send = (on: EdgeFixture, key: string, n: number) =>
  on.post(reports(n), { key, url: "/api/reports" });
const queued = async (projectId: string) =>
  (await a.records()).filter((r) => r.project_id === projectId).length;
const codes = (results: Record<string, unknown>[]) =>
  results.map((r) => ("id" in r ? "ok" : String(r.error)));

describe("the monthly quota", () => {
  it("one edge: 8 reports on a quota of 5: the first 5 pass, 3 quota_exceeded, then a 429", async () => {
    await notAtMonthEnd();
    const k = await a.createKey({
      plan: "free",
      overrides: { monthly: 5, burst: 10_000, capacity: 10_000 },
    });
    const res = await send(a, k.key, 8);
    expect(res.statusCode).toBe(207);
    expect(codes(res.json().results)).toEqual([
      ...Array(5).fill("ok"),
      ...Array(3).fill("quota_exceeded"),
    ]);
    expect(res.headers["ratelimit-limit"]).toBe("5");
    expect(res.headers["ratelimit-remaining"]).toBe("0");
    expect(res.json().results[5]).toMatchObject({ limit: 5, remaining: 0, used: 5 });
    const again = await send(a, k.key, 3);
    expect(again.statusCode).toBe(429);
    expect(again.json()).toMatchObject({ error: "quota_exceeded" });
    expect(await queued(k.projectId)).toBe(5);
  });

  it("two edges, batches at once: exactly the quota passes, in each batch a prefix", async () => {
    await notAtMonthEnd();
    const quota = 300;
    const k = await a.createKey({
      plan: "free",
      overrides: { monthly: quota, burst: 100_000, capacity: 100_000 },
    });
    const sends = Array.from({ length: 16 }, (_, i) => send(i % 2 ? b : a, k.key, 25));
    const answers = await Promise.all(sends);
    let accepted = 0;
    for (const res of answers) {
      expect([200, 207, 429]).toContain(res.statusCode);
      if (res.statusCode === 429) continue;
      const c = codes(res.json().results);
      const ok = c.filter((x) => x === "ok").length;
      // The reports taken are the first of their batch.
      expect(c).toEqual([...Array(ok).fill("ok"), ...Array(25 - ok).fill("quota_exceeded")]);
      accepted += ok;
    }
    expect(accepted).toBe(quota);
    expect(await queued(k.projectId)).toBe(quota);
  });
});

describe("the burst limit", () => {
  // A bucket refills at 1 a second: one batch's take is exact; across takes, the tokens due
  // meanwhile pass too.
  it("one edge: 5 reports on a bucket of 3: the first 3 pass, 2 rate_limited", async () => {
    const k = await a.createKey({ plan: "free", overrides: { burst: 1, capacity: 3 } });
    const res = await send(a, k.key, 5);
    expect(res.statusCode).toBe(207);
    expect(codes(res.json().results)).toEqual(["ok", "ok", "ok", "rate_limited", "rate_limited"]);
    expect(res.headers["retry-after"]).toBe("1");
    expect(res.json().results[3]).toMatchObject({ limit: 1, remaining: 0 });
    expect(await queued(k.projectId)).toBe(3);
  });

  it("two edges, batches at once on a bucket of 120: 120 pass, and the tokens due meanwhile", async () => {
    const k = await a.createKey({ plan: "free", overrides: { burst: 1, capacity: 120 } });
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => send(i % 2 ? b : a, k.key, 20)),
    );
    let accepted = 0;
    for (const res of answers) {
      if (res.statusCode === 429) continue;
      const c = codes(res.json().results);
      const ok = c.filter((x) => x === "ok").length;
      expect(c).toEqual([...Array(ok).fill("ok"), ...Array(20 - ok).fill("rate_limited")]);
      accepted += ok;
    }
    const refilled = Math.floor((Date.now() - started) / 1000);
    expect(accepted).toBeGreaterThanOrEqual(120);
    expect(accepted).toBeLessThanOrEqual(120 + refilled);
    expect(await queued(k.projectId)).toBe(accepted);
  });

  it("a batch refused by the quota after the burst: the limits' codes in order", async () => {
    await notAtMonthEnd();
    const k = await a.createKey({ plan: "free", overrides: { monthly: 2, burst: 1, capacity: 4 } });
    // Invalid items take no limit, and do not shift which report each limit refused.
    const res = await a.post([{ limits: {} }, { limits: {} }, ...reports(6)], {
      key: k.key,
      url: "/api/reports",
    });
    expect(codes(res.json().results)).toEqual([
      "invalid_report",
      "invalid_report",
      "ok",
      "ok",
      "quota_exceeded",
      "quota_exceeded",
      "rate_limited",
      "rate_limited",
    ]);
  });
});
