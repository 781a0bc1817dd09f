import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_LIMITS, NULL_LIMITS } from "../../fixtures/sample-reports.js";
import {
  clientReport,
  type EdgeFixture,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// The real client fires and forgets: it never reads an answer, so a 400 loses the report without
// anyone knowing. What it can send must be kept: an unusable optional value is stored as null (or
// cut) and named in the 200's warnings; only what cannot be a report is refused.

let fx: EdgeFixture;
let key: TestKey;

beforeAll(async () => {
  fx = await startEdge();
  key = await fx.createKey();
});

afterAll(async () => {
  await fx?.close();
});

/** The stored record of the report a 200 answered. */
async function stored(id: string) {
  const record = (await fx.records()).find((r) => r.report_id === id);
  expect(record, `report ${id} is queued`).toBeDefined();
  return record;
}

describe("what the real client can send is kept", () => {
  it('"model": "" (the request body\'s model as it is) is stored as null', async () => {
    const res = await fx.post(clientReport({ model: "" }), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      { path: "model", message: expect.stringMatching(/empty.*stored as null/) },
    ]);
    expect((await stored(res.json().id))?.model).toBeNull();
  });

  it("a limit of 2^63 or more (a header of 1e19) is stored as null, the other limits kept", async () => {
    const limits = {
      ...(clientReport().limits as object),
      requests_limit: 1e19,
      tokens_limit: -1e19,
    };
    const res = await fx.post(clientReport({ limits }), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(
      res
        .json()
        .warnings.map((w: { path: string }) => w.path)
        .sort(),
    ).toEqual(["limits.requests_limit", "limits.tokens_limit"]);
    const record = await stored(res.json().id);
    expect(record?.requests_limit).toBeNull();
    expect(record?.tokens_limit).toBeNull();
    expect(record?.requests_remaining).toBe(9_999);
  });

  it("a credit value of 1e21 or more is stored as null", async () => {
    const credits = { credits_limit: 1e21, credits_remaining: 12.5, request_cost: 0.002 };
    const res = await fx.post(clientReport({ credits }), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      { path: "credits.credits_limit", message: expect.stringContaining("stored as null") },
    ]);
    const record = await stored(res.json().id);
    expect(record?.credits_limit).toBeNull();
    expect(record?.credits_remaining).toBe(12.5);
  });

  it("a negative cost is stored as null (costs only add up); a negative balance is kept", async () => {
    const credits = { credits_limit: 100, credits_remaining: -3.5, request_cost: -4 };
    const res = await fx.post(clientReport({ credits }), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      { path: "credits.request_cost", message: "must not be negative: stored as null" },
    ]);
    const record = await stored(res.json().id);
    expect(record?.request_cost).toBeNull();
    expect(record?.credits_remaining).toBe(-3.5);
  });

  it("a model over 256 and an app over 128 characters are cut at the limit", async () => {
    const res = await fx.post(
      clientReport({ model: "m".repeat(300), app: ` ${"a".repeat(200)} ` }),
      {
        key: key.key,
      },
    );
    expect(res.statusCode).toBe(200);
    expect(
      res
        .json()
        .warnings.map((w: { path: string }) => w.path)
        .sort(),
    ).toEqual(["app", "model"]);
    const record = await stored(res.json().id);
    expect(record?.model).toBe("m".repeat(256));
    expect(record?.app).toBe("a".repeat(128));
  });

  it("lengths count characters, and a cut never splits one", async () => {
    const res = await fx.post(clientReport({ model: `${"m".repeat(255)}😀tail` }), {
      key: key.key,
    });
    expect(res.statusCode).toBe(200);
    expect((await stored(res.json().id))?.model).toBe(`${"m".repeat(255)}😀`);
    const emoji = await fx.post(clientReport({ app: "😀".repeat(128) }), { key: key.key });
    expect(emoji.statusCode).toBe(200);
    expect(emoji.json().warnings).toBeUndefined();
  });

  it("a timestamp out of its window is replaced by the time the report was received", async () => {
    const before = Date.now();
    const res = await fx.post(clientReport({ timestamp: "1999-12-31T23:59:59.000Z" }), {
      key: key.key,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings[0].path).toBe("timestamp");
    const record = await stored(res.json().id);
    expect(record?.timestamp).toBe(record?.received_at);
    expect(Date.parse(record?.timestamp ?? "")).toBeGreaterThanOrEqual(before);
  });

  it.each([
    ["not a date", "yesterday"],
    ["a date without time", "2025-03-04"],
    ["no zone", "2025-03-04T10:00:00"],
    ["an impossible date", "2025-02-30T10:00:00Z"],
    ["more than a day ahead", new Date(Date.now() + 25 * 3600_000).toISOString()],
  ])("a timestamp that is %s: the receive time, with a warning", async (_name, timestamp) => {
    const res = await fx.post(clientReport({ timestamp }), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      { path: "timestamp", message: expect.stringContaining("stored as null") },
    ]);
    const record = await stored(res.json().id);
    expect(record?.timestamp).toBe(record?.received_at);
  });

  it("a report with nothing unusable has no warnings", async () => {
    const res = await fx.post(clientReport(), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: expect.any(String) });
  });

  it("the warnings are counted by kind (the field they name) in the metrics", async () => {
    const count = async (kind: string) => {
      const text = (await fx.edge.app.inject({ method: "GET", url: "/metrics" })).body;
      const line = new RegExp(`^headroom_report_warnings_total\\{kind="${kind}"\\} (\\d+)$`, "m");
      return Number(line.exec(text)?.[1] ?? 0);
    };
    const before = { model: await count("model"), limits: await count("limits") };
    const limits = { ...(clientReport().limits as object), requests_limit: 1e19 };
    const res = await fx.post(clientReport({ model: "", limits }), { key: key.key });
    expect(res.statusCode).toBe(200);
    expect(await count("model")).toBe(before.model + 1);
    expect(await count("limits")).toBe(before.limits + 1);
  });
});

describe("a number too large for a double (400 digits) is stored as null, as 1e300 is", () => {
  // JSON.parse makes ±Infinity of it: the report, or the batch item, must still be kept.
  const BIG = `1${"0".repeat(400)}`;
  /** A body whose "BIG" and "-BIG" strings are that number's digits. */
  const withBig = (value: unknown) =>
    JSON.stringify(value).replaceAll('"BIG"', BIG).replaceAll('"-BIG"', `-${BIG}`);
  let s: ReadStack;
  let k: ProjectKeys;

  beforeAll(async () => {
    s = await startReadStack();
    k = await s.project();
  });

  afterAll(async () => {
    await s?.close();
  });

  const post = (url: string, payload: string) =>
    s.edge.app.inject({
      method: "POST",
      url,
      headers: { authorization: `Bearer ${k.report}`, "content-type": "application/json" },
      payload,
    });

  /** The report's row in ClickHouse, once the worker has stored it. */
  async function row(id: string) {
    await eventually(
      async () =>
        expect(
          await s.sql("SELECT 1 FROM {db:Identifier}.reports_v WHERE report_id = {id:UUID}", {
            db: s.db,
            id,
          }),
        ).toHaveLength(1),
      { timeoutMs: 20_000 },
    );
    const [r] = await s.sql<Record<string, unknown>>(
      `SELECT requests_limit, requests_remaining, tokens_limit, credits_limit, credits_remaining,
        request_cost FROM {db:Identifier}.reports_v WHERE report_id = {id:UUID}`,
      { db: s.db, id },
    );
    return r;
  }

  const paths = (warnings: { path: string }[]) => warnings.map((w) => w.path).sort();

  it("in a single report: a limit and a credit figure, with a warning each", async () => {
    const body = clientReport({
      limits: { ...CLIENT_LIMITS, requests_limit: "BIG" },
      credits: { credits_limit: 100, credits_remaining: "-BIG", request_cost: 0.5 },
    });
    const res = await post("/api/report", withBig(body));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().warnings).toEqual([
      {
        path: "limits.requests_limit",
        message: "must fit a signed 64-bit integer: stored as null",
      },
      {
        path: "credits.credits_remaining",
        message: "must be below 1e21 in magnitude: stored as null",
      },
    ]);
    expect(await row(res.json().id)).toEqual({
      requests_limit: null,
      requests_remaining: CLIENT_LIMITS.requests_remaining,
      tokens_limit: CLIENT_LIMITS.tokens_limit,
      credits_limit: 100,
      credits_remaining: null,
      request_cost: 0.5,
    });
  });

  it("in a batch item: that item kept with its warnings, the others as they are", async () => {
    const items = [
      clientReport(),
      clientReport({
        limits: { ...CLIENT_LIMITS, tokens_limit: "-BIG" },
        credits: { credits_limit: "BIG", credits_remaining: 7, request_cost: "BIG" },
      }),
    ];
    const res = await post("/api/reports", withBig(items));
    expect(res.statusCode, res.body).toBe(200);
    const [plain, big] = res.json().results;
    expect(plain.warnings).toBeUndefined();
    expect(paths(big.warnings)).toEqual([
      "credits.credits_limit",
      "credits.request_cost",
      "limits.tokens_limit",
    ]);
    expect(await row(big.id)).toEqual({
      requests_limit: CLIENT_LIMITS.requests_limit,
      requests_remaining: CLIENT_LIMITS.requests_remaining,
      tokens_limit: null,
      credits_limit: null,
      credits_remaining: 7,
      request_cost: null,
    });
  });

  it("NaN and Infinity, which are no JSON, are still invalid_json", async () => {
    for (const literal of ["NaN", "Infinity", "-Infinity"]) {
      const body = withBig(clientReport()).replace(
        '"requests_limit":10000',
        `"requests_limit":${literal}`,
      );
      const res = await post("/api/report", body);
      expect(res.statusCode, literal).toBe(400);
      expect(res.json().error).toBe("invalid_json");
    }
  });
});

describe("what cannot be a report is still refused", () => {
  it.each([
    ["no provider", clientReport({ provider: undefined })],
    ["an empty provider", clientReport({ provider: "  " })],
    ["no limits", clientReport({ limits: undefined })],
    ["limits not an object", clientReport({ limits: [1, 2] })],
    ["a limit as a string", clientReport({ limits: { requests_limit: "10" } })],
    ["a model of the wrong type", clientReport({ model: 42 })],
    ["a timestamp of the wrong type", clientReport({ timestamp: 1_700_000_000_000 })],
  ])("%s: 400 invalid_report, nothing queued", async (_, body) => {
    const before = (await fx.records()).length;
    const res = await fx.post(body, { key: key.key });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe("invalid_report");
    expect((await fx.records()).length).toBe(before);
  });

  it("an unusable optional value beside a wrong type: 400 names only the wrong type", async () => {
    const res = await fx.post(clientReport({ model: "", limits: "none" }), { key: key.key });
    expect(res.statusCode).toBe(400);
    expect(res.json().issues.map((i: { path: string }) => i.path)).toEqual(["limits"]);
  });
});

describe("the burst limit is a token bucket", () => {
  it("a start-up burst of 15 provider hints and 5 calls on a free key all pass at once", async () => {
    const free = await fx.createKey({ plan: "free" });
    const hint = (provider: string) => ({
      app: "chat-api",
      provider,
      model: null,
      timestamp: new Date().toISOString(),
      limits: NULL_LIMITS,
    });
    const providers = Array.from({ length: 15 }, (_, i) => `provider-${i}`);
    const answers = await Promise.all([
      ...providers.map((p) => fx.post(hint(p), { key: free.key })),
      ...Array.from({ length: 5 }, () => fx.post(clientReport(), { key: free.key })),
    ]);
    expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
  });

  it("a sustained flood on a free key is still cut to the bucket, with 429 and its headers", async () => {
    const free = await fx.createKey({ plan: "free" });
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 300 }, () => fx.post(clientReport(), { key: free.key })),
    );
    const elapsedS = (performance.now() - started) / 1000;
    const ok = answers.filter((a) => a.statusCode === 200).length;
    // 50 at once, plus at most what refilled at 10 a second while the flood was answered.
    expect(ok).toBeGreaterThanOrEqual(50);
    expect(ok).toBeLessThanOrEqual(50 + Math.ceil(elapsedS * 10) + 1);
    const refused = answers.find((a) => a.statusCode === 429);
    expect(refused?.json()).toMatchObject({ error: "rate_limited", limit: 10, remaining: 0 });
    expect(Number(refused?.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(refused?.headers["ratelimit-limit"]).toBe("10");
  });
});
