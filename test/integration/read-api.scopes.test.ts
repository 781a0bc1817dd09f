import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, createApi } from "../../src/api/create-api.js";
import { buildApiOpenApi } from "../../src/api/openapi.js";
import { READ_TAKE_SHARE } from "../../src/api/read-limit.js";
import { loadConfig } from "../../src/config.js";
import { hotKeys } from "../../src/headroom/hot-store.js";
import { createLogger } from "../../src/lib/logger.js";
import { queuedRecords, uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import {
  ENDPOINTS,
  type ProjectKeys,
  type ReadStack,
  startReadStack,
} from "../helpers/read-stack.js";
import { redisNow, untilRedisMs } from "../helpers/redis-clock.js";
import { monitorRedis } from "../helpers/redis-monitor.js";

// Keys work only within their scope, and a read key only ever sees its own project, through
// every endpoint and filter. Reports go in through the real edge and worker.

let s: ReadStack;
let a: ProjectKeys;
let b: ProjectKeys;

const hour = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();

beforeAll(async () => {
  s = await startReadStack();
  [a, b] = [await s.project(), await s.project()];
  // The same provider, model and app in both projects: only the project tells them apart.
  const report = (remaining: number, h: number) => ({
    app: "chat",
    provider: "openai",
    model: "gpt-4o",
    timestamp: hour(h),
    limits: {
      requests_limit: 100,
      requests_remaining: remaining,
      tokens_limit: 1000,
      tokens_remaining: remaining * 10,
      reset_requests_ms: 1000,
      reset_tokens_ms: 1000,
    },
    credits: { credits_limit: 50, credits_remaining: remaining / 2, request_cost: 0.25 },
  });
  await s.send(a.report, [report(90, 2), report(80, 1)]);
  await s.send(b.report, [report(10, 2), report(5, 1), report(1, 0.5)]);
  await Promise.all([s.stored(a.project, 2), s.stored(b.project, 3)]);
});

afterAll(async () => {
  await s?.close();
});

describe("scopes", () => {
  it("serves /healthz and its OpenAPI document without a key", async () => {
    expect((await s.get("/healthz")).statusCode).toBe(200);
    const doc = await s.get("/api/v1/openapi.json");
    expect(doc.statusCode).toBe(200);
    expect(doc.json()).toEqual(JSON.parse(JSON.stringify(buildApiOpenApi())));
  });

  it.each(ENDPOINTS)("a report key gets 403 insufficient_scope on %s", async (url) => {
    const res = await s.get(url, a.report);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ error: "insufficient_scope" });
    expect(res.headers["www-authenticate"]).toBe('Bearer error="insufficient_scope"');
  });

  it.each(ENDPOINTS)("no key, or an unknown one, is 401 on %s", async (url) => {
    expect((await s.get(url)).statusCode).toBe(401);
    const unknown = await s.get(url, `hrr_${"A".repeat(33)}`);
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json()).toMatchObject({ error: "invalid_project_key" });
  });

  it.each([
    ["/api/report", { provider: "openai", limits: {} }],
    ["/api/reports", [{ provider: "openai", limits: {} }]],
  ])("a read key gets 403 on POST %s, and nothing is queued", async (url, body) => {
    const before = (await queuedRecords(s.edge.queue)).length;
    const res = await s.edge.app.inject({
      method: "POST",
      url,
      headers: { authorization: `Bearer ${a.read}`, "content-type": "application/json" },
      payload: JSON.stringify(body),
    });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ error: "insufficient_scope" });
    expect(res.headers["www-authenticate"]).toBe('Bearer error="insufficient_scope"');
    expect((await queuedRecords(s.edge.queue)).length).toBe(before);
    // And nothing reached ClickHouse for the project beyond its two reports.
    await s.stored(a.project, 2);
  });

  it("a revoked read key is 401", async () => {
    const c = await s.project();
    const [info] = (await s.edge.keyStore.list(c.project)).filter((k) => k.scope === "read");
    expect(await s.edge.keyStore.revoke(info?.keyId ?? "")).toBe(true);
    await expect
      .poll(async () => (await s.get("/api/v1/headroom", c.read)).statusCode, { timeout: 5_000 })
      .toBe(401);
  });
});

describe("two projects never see each other's data", () => {
  const filters = ["", "provider=openai", "model=gpt-4o", "app=chat", "provider=openai&app=chat"];
  const since = () => encodeURIComponent(hour(24));

  it.each(filters)("headroom, usage, reports and spend (%s)", async (filter) => {
    for (const k of [a, b]) {
      const other = k === a ? b : a;
      const q = filter ? `&${filter}` : "";
      const head = (await s.get(`/api/v1/headroom?${filter}`, k.read)).json();
      expect(head.series).toHaveLength(1);
      expect(head.series[0].requests.remaining).toBe(k === a ? 80 : 1);

      const reports = (await s.get(`/api/v1/reports?from=${since()}${q}`, k.read)).json();
      expect(reports.items).toHaveLength(k === a ? 2 : 3);
      const otherIds = (await s.get(`/api/v1/reports?from=${since()}${q}`, other.read))
        .json()
        .items.map((r: { id: string }) => r.id);
      for (const r of reports.items) expect(otherIds).not.toContain(r.id);

      const usage = (await s.get(`/api/v1/usage?from=${since()}&window=day${q}`, k.read)).json();
      const total = usage.points.reduce((n: number, p: { reports: number }) => n + p.reports, 0);
      expect(total).toBe(k === a ? 2 : 3);

      const spend = (await s.get(`/api/v1/spend?from=${since()}${q}`, k.read)).json();
      expect(spend.providers).toEqual([
        expect.objectContaining({ provider: "openai", requests: k === a ? 2 : 3 }),
      ]);
    }
  });

  it("alert events of one project are not listed for the other", async () => {
    // Events are written by the alerts worker; one inserted directly stands for one here.
    await s.p.client.insert({
      table: `${s.db}.alert_events`,
      format: "JSONEachRow",
      values: [
        {
          event_id: `evt_${"a".repeat(32)}`,
          rule_id: "alr_1",
          project_id: b.project,
          provider: "openai",
          model: "gpt-4o",
          app: "chat",
          metric: "requests",
          level: "critical",
          used_pct: 99,
          limit: 100,
          remaining: 1,
          reset_ms: null,
          burn_per_s: null,
          exhaustion_eta_s: null,
          warn_pct: 70,
          critical_pct: 90,
          report_id: "00000000-0000-7000-8000-000000000000",
          at: new Date(Date.now() - 60_000).toISOString().replace("T", " ").replace("Z", ""),
        },
      ],
    });
    const mine = (await s.get("/api/v1/alerts/events", b.read)).json();
    expect(mine.items.map((e: { id: string }) => e.id)).toEqual([`evt_${"a".repeat(32)}`]);
    for (const q of ["", "?provider=openai", "?level=critical"]) {
      const theirs = (await s.get(`/api/v1/alerts/events${q}`, a.read)).json();
      expect(theirs.items).toEqual([]);
    }
  });
});

/** A read API of its own over the same stores, with other settings. */
async function apiWith(env: Record<string, string>, now?: () => number) {
  const config = loadConfig({ ...s.p.env, ...env });
  return createApi(config, createLogger("silent", "test"), { clickhouse: s.p.client, now });
}

describe("the read limit", () => {
  it("answers 429 rate_limited like the report endpoint once a key's bucket is empty", async () => {
    const api = await apiWith({ READ_RATE_PER_S: "1", READ_BURST: "3" });
    try {
      const c = await s.project();
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          api.app.inject({
            method: "GET",
            url: "/api/v1/headroom",
            headers: { authorization: `Bearer ${c.read}` },
          }),
        ),
      );
      const codes = answers.map((r) => r.statusCode);
      expect(codes).toContain(200);
      const refused = answers.find((r) => r.statusCode === 429);
      expect(refused, codes.join(",")).toBeDefined();
      expect(refused?.json()).toMatchObject({ error: "rate_limited", limit: 1, remaining: 0 });
      for (const h of [
        "retry-after",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
      ]) {
        expect(refused?.headers[h], h).toBeDefined();
      }
      // Another key of the same project has a bucket of its own.
      const other = (
        await s.edge.keyStore.create(c.project, { defaultPlan: "unlimited", scope: "read" })
      ).key;
      const res = await api.app.inject({
        method: "GET",
        url: "/api/v1/headroom",
        headers: { authorization: `Bearer ${other}` },
      });
      expect(res.statusCode).toBe(200);
    } finally {
      await api.close();
    }
  });

  it("refills a key's emptied bucket at READ_RATE_PER_S, no faster and no slower", async () => {
    const rate = 10;
    const windowMs = 1_500;
    // Ten times the rate over the window fits in the bucket: a refill too fast shows in full.
    const api = await apiWith({ READ_RATE_PER_S: String(rate), READ_BURST: "200" });
    const redis = s.p.redis;
    const due = (from: number, to: number) => Math.floor(((to - from) * rate) / 1000);
    // Tokens a process may hold from its last take, spent without asking Redis.
    const chunk = Math.max(1, Math.floor(rate * READ_TAKE_SHARE));
    try {
      const c = await s.project();
      const burst = async (n: number) => {
        const answers = await Promise.all(
          Array.from({ length: n }, () =>
            api.app.inject({
              method: "GET",
              url: "/api/v1/headroom",
              headers: { authorization: `Bearer ${c.read}` },
            }),
          ),
        );
        for (const r of answers) expect([200, 429], r.body).toContain(r.statusCode);
        return answers.filter((r) => r.statusCode === 200).length;
      };
      // Empty the bucket: requests at once until some are refused.
      let lastStart = 0;
      let emptiedBy = 0;
      for (let refused = false; !refused; ) {
        lastStart = await redisNow(redis);
        refused = (await burst(50)) < 50;
        emptiedBy = await redisNow(redis);
      }

      await untilRedisMs(redis, emptiedBy + windowMs);
      const from = await redisNow(redis);
      const passed = await burst(200);
      const to = await redisNow(redis);
      expect(passed).toBeLessThan(200);
      // At least what came back meanwhile, but for what one take may leave in hand; at most
      // that, the part token left after the refusal, and what was held from the last take.
      expect(passed).toBeGreaterThanOrEqual(due(emptiedBy, from) - chunk);
      expect(passed).toBeLessThanOrEqual(due(lastStart, to) + 1 + chunk);
    } finally {
      await api.close();
    }
  });
});

describe("identical queries share one ClickHouse query", () => {
  it("within READ_CACHE_TTL_MS an identical query answers what the first one read, per project", async () => {
    const api = await apiWith({ READ_CACHE_TTL_MS: "60000" });
    try {
      const c = await s.project();
      // /reports goes through the query cache (/headroom reads the hot copy in Redis instead),
      // over a range given in full: the same query text and parameters each time.
      const t = Date.now();
      const range = `from=${encodeURIComponent(new Date(t - 6 * 86_400_000).toISOString())}&to=${encodeURIComponent(new Date(t + 3_600_000).toISOString())}`;
      const url = `/api/v1/reports?${range}`;
      const get = async (key: string) =>
        (
          await api.app.inject({
            method: "GET",
            url,
            headers: { authorization: `Bearer ${key}` },
          })
        ).json();
      const first = await get(c.read);
      expect(first.items).toEqual([]);
      await s.send(c.report, [
        { provider: "openai", limits: { requests_limit: 10, requests_remaining: 9 } },
      ]);
      await s.stored(c.project, 1);
      // Stored, yet the same query within the TTL is the first one's answer...
      expect((await get(c.read)).items).toEqual([]);
      // ...while the API without the cache (the stack's, TTL 0) sees it, and another project's
      // identical request never gets this one's entry.
      expect((await s.get(url, c.read)).json().items).toHaveLength(1);
      expect((await get(a.read)).items).toHaveLength(2);
      expect((await get(a.read)).items[0].limits.requests_remaining).toBe(80);
    } finally {
      await api.close();
    }
  });
});

describe("identical /headroom requests share one answer for READ_HEADROOM_TTL_MS", () => {
  // The API's clock moves a millisecond per reading: an answer made again has another `at`.
  const ticking = () => {
    let t = Date.now();
    return () => t++;
  };
  const headroom = async (api: Api, key: string) => {
    const res = await api.app.inject({
      method: "GET",
      url: "/api/v1/headroom",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { at: string; series: { requests: { remaining: number } }[] };
  };
  const at = async (api: Api, key: string) => (await headroom(api, key)).at;

  it("answers within the TTL what the first request read, per project, and anew after it", async () => {
    const api = await apiWith({ READ_HEADROOM_TTL_MS: "2000" }, ticking());
    try {
      const c = await s.project();
      // The first request refills the project's hot copy; answers are shared once it is whole.
      await at(api, c.read);
      const first = await at(api, c.read);
      expect(await at(api, c.read)).toBe(first);
      // Another project's identical request is never this one's answer.
      expect(await at(api, a.read)).not.toBe(first);
      await eventually(async () => expect(await at(api, c.read)).not.toBe(first), {
        timeoutMs: 10_000,
      });
    } finally {
      await api.close();
    }
  });

  /** An API whose answers last an hour, a TTL no test outlives: only a version makes a new one. */
  const hourTtlApi = () =>
    createApi(
      { ...loadConfig({ ...s.p.env }), READ_HEADROOM_TTL_MS: 3_600_000 },
      createLogger("silent", "test"),
      { clickhouse: s.p.client, now: ticking() },
    );

  it("answers anew as soon as a report changed the hot copy, TTL or not", async () => {
    const api = await hourTtlApi();
    try {
      const c = await s.project();
      await at(api, c.read);
      const first = await headroom(api, c.read);
      expect(first.series).toEqual([]);
      expect((await headroom(api, c.read)).at).toBe(first.at);
      await s.send(c.report, [
        { provider: "openai", limits: { requests_limit: 10, requests_remaining: 7 } },
      ]);
      await eventually(async () =>
        expect((await headroom(api, c.read)).series.map((x) => x.requests.remaining)).toEqual([7]),
      );
    } finally {
      await api.close();
    }
  });

  /** The Redis commands with `needle` as an argument while `fn` ran (MONITOR, its own connection). */
  async function commandsNaming(needle: string, fn: () => Promise<void>): Promise<string[]> {
    const { host, port, username, password } = (s.p.redis as Redis).options;
    const monitor = await monitorRedis({ host, port, username, password });
    const marker = `marker-${uniqueId()}`;
    try {
      await fn();
      // Every command sent before the marker has reached the monitor once the marker has.
      await s.p.redis.get(marker);
      await eventually(() => expect(monitor.commands.some((c) => c.includes(marker))).toBe(true));
    } finally {
      monitor.stop();
    }
    const upToMarker = monitor.commands.slice(
      0,
      monitor.commands.findIndex((c) => c.includes(marker)),
    );
    // The whole argument: project r-…-1's key is a prefix of project r-…-12's.
    return upToMarker.filter((c) => c.includes(needle)).map((c) => c.join(" "));
  }

  // That the workers' pushes reach it is the test above's (a TTL of an hour) and hot-versions'.
  it("serves a held answer whose version it knows without asking Redis", async () => {
    const api = await hourTtlApi();
    try {
      const c = await s.project();
      await at(api, c.read);
      const first = await at(api, c.read);
      const ready = hotKeys(s.p.config.QUEUE_PREFIX).ready(c.project);
      // Three requests in a row: once the first push reached the API (at once, unless its
      // subscription was reconnecting), none asks Redis about the project's copy.
      await eventually(
        async () => {
          const named = await commandsNaming(ready, async () => {
            for (let i = 0; i < 3; i++) expect(await at(api, c.read)).toBe(first);
          });
          expect(named).toEqual([]);
        },
        { timeoutMs: 10_000 },
      );
    } finally {
      await api.close();
    }
  });

  it("makes an answer again after its TTL from the copy it was made from while the copy's version stands", async () => {
    const api = await apiWith({ READ_HEADROOM_TTL_MS: "50" }, ticking());
    try {
      const first = await headroom(api, a.read);
      expect(first.series.map((x) => x.requests.remaining)).toEqual([80]);
      const copy = hotKeys(s.p.config.QUEUE_PREFIX).series(a.project);
      // A request past the TTL makes the answer again (its `at` moves on): the round trip asks
      // for the copy's version only, and Redis sends the copy itself (HGETALL) only when it moved.
      await eventually(
        async () => {
          let again: { at: string; series: { requests: { remaining: number } }[] } | undefined;
          const named = await commandsNaming(copy, async () => {
            again = await headroom(api, a.read);
          });
          expect(again?.at).not.toBe(first.at);
          expect(again?.series).toEqual(first.series);
          expect(named.filter((c) => /^hgetall /i.test(c))).toEqual([]);
          expect(named.length).toBeGreaterThan(0);
        },
        { timeoutMs: 10_000 },
      );
    } finally {
      await api.close();
    }
  });

  it("makes each answer anew with READ_HEADROOM_TTL_MS=0", async () => {
    const api = await apiWith({ READ_HEADROOM_TTL_MS: "0" }, ticking());
    try {
      const c = await s.project();
      const first = await at(api, c.read);
      expect(await at(api, c.read)).not.toBe(first);
    } finally {
      await api.close();
    }
  });
});

describe("the last 24 h of usage, shared across the minute's turn", () => {
  it("keeps answering the same dashboard's query when the minute turns, within the TTL", async () => {
    let t = Date.now();
    const api = await apiWith({ READ_CACHE_TTL_MS: "60000" }, () => t);
    try {
      const get = async (url: string) =>
        (
          await api.app.inject({
            method: "GET",
            url,
            headers: { authorization: `Bearer ${a.read}` },
          })
        ).json();
      const first = await get("/api/v1/usage?window=minute");
      // A minute later the range resolves to other bounds: the same question, the same answer.
      t += 60_000;
      expect(await get("/api/v1/usage?window=minute")).toEqual(first);
      // A range given explicitly is a question of its own.
      const explicit = await get(
        `/api/v1/usage?window=minute&from=${encodeURIComponent(new Date(t - 86_400_000).toISOString())}`,
      );
      expect(explicit.to).not.toBe(first.to);
    } finally {
      await api.close();
    }
  });
});
