import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_LIMITS, NULL_LIMITS } from "../../fixtures/sample-reports.js";
import {
  clientReport,
  type EdgeFixture,
  startEdge,
  type TestKey,
  UUID_V7,
} from "../helpers/edge-fixture.js";

// POST /api/reports: each item of a batch is a single report, validated, answered and stored on
// its own; only a broken envelope refuses the request.

let fx: EdgeFixture;
let key: TestKey;

beforeAll(async () => {
  fx = await startEdge();
  key = await fx.createKey();
});

afterAll(async () => {
  await fx?.close();
});

const batch = (body: unknown, o: { key?: string; type?: string } = {}) =>
  fx.post(body, {
    key: o.key ?? key.key,
    url: "/api/reports",
    headers: o.type ? { "content-type": o.type } : {},
  });

const ndjson = (lines: string[]) => `${lines.join("\n")}\n`;

describe("a batch mixing valid, lenient and invalid items", () => {
  it("answers each item in order and stores exactly the valid and lenient ones, field-exact", async () => {
    const k = await fx.createKey();
    const ts = new Date(Date.now() - 60_000).toISOString();
    const items = [
      clientReport({ timestamp: ts }),
      { provider: "Anthropic ", limits: { ...NULL_LIMITS }, model: "", timestamp: ts },
      { limits: {} },
      "not a report",
      clientReport({ timestamp: ts, limits: { ...CLIENT_LIMITS, requests_limit: 1e30 } }),
      JSON.parse('{"provider":"x","limits":{},"__proto__":{"a":1}}'),
      clientReport({ id: "not-a-uuid" }),
    ];
    const res = await batch(items, { key: k.key });
    expect(res.statusCode).toBe(207);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(res.body).toBe(JSON.stringify(res.json()));
    const { results } = res.json();
    expect(results).toHaveLength(items.length);
    expect(results[0]).toEqual({ id: expect.stringMatching(UUID_V7) });
    expect(results[1]).toEqual({
      id: expect.stringMatching(UUID_V7),
      warnings: [{ path: "model", message: expect.stringMatching(/empty.*stored as null/) }],
    });
    expect(results[2]).toMatchObject({
      error: "invalid_report",
      issues: [{ path: "provider", message: expect.any(String) }],
    });
    expect(results[3]).toMatchObject({ error: "invalid_report" });
    expect(results[4]).toEqual({
      id: expect.stringMatching(UUID_V7),
      warnings: [
        { path: "limits.requests_limit", message: expect.stringMatching(/stored as null/) },
      ],
    });
    expect(results[5]).toMatchObject({
      error: "invalid_report",
      issues: [{ path: "__proto__", message: "forbidden key" }],
    });
    expect(results[6]).toMatchObject({
      error: "invalid_report",
      issues: [{ path: "id", message: "expected a UUID or null" }],
    });

    const stored = (await fx.records()).filter((r) => r.project_id === k.projectId);
    const byId = new Map(stored.map((r) => [r.report_id, r]));
    expect(stored).toHaveLength(3);
    const common = { project_id: k.projectId, key_id: k.keyId, timestamp: ts };
    expect(byId.get(results[0].id)).toMatchObject({
      ...common,
      app: "chat-api",
      provider: "openai",
      model: "gpt-4o-mini",
      ...CLIENT_LIMITS,
      credits_limit: null,
    });
    expect(byId.get(results[1].id)).toMatchObject({
      ...common,
      app: "default",
      provider: "anthropic",
      model: null,
      ...NULL_LIMITS,
    });
    expect(byId.get(results[4].id)).toMatchObject({
      ...common,
      ...CLIENT_LIMITS,
      requests_limit: null,
    });
  });

  it("a batch of valid items only is a 200", async () => {
    const res = await batch([clientReport(), clientReport()]);
    expect(res.statusCode).toBe(200);
    expect(res.json().results).toEqual([
      { id: expect.stringMatching(UUID_V7) },
      { id: expect.stringMatching(UUID_V7) },
    ]);
  });

  it("a client id becomes the report's id", async () => {
    const id = randomUUID().toUpperCase();
    const res = await batch([clientReport({ id })]);
    expect(res.statusCode).toBe(200);
    expect(res.json().results).toEqual([{ id: id.toLowerCase() }]);
    expect((await fx.records()).some((r) => r.report_id === id.toLowerCase())).toBe(true);
  });
});

describe("NDJSON", () => {
  it("a broken line in the middle is that item's error; the others are stored", async () => {
    const k = await fx.createKey();
    const good = JSON.stringify(clientReport());
    const res = await batch(ndjson([good, good, '{"provider": "openai", "lim', "", good]), {
      key: k.key,
      type: "application/x-ndjson",
    });
    expect(res.statusCode).toBe(207);
    const { results } = res.json();
    expect(results).toHaveLength(4);
    expect(results[2]).toMatchObject({ error: "invalid_json" });
    for (const i of [0, 1, 3]) expect(results[i]).toEqual({ id: expect.stringMatching(UUID_V7) });
    const stored = (await fx.records()).filter((r) => r.project_id === k.projectId);
    expect(stored.map((r) => r.report_id).sort()).toEqual(
      [results[0].id, results[1].id, results[3].id].sort(),
    );
  });
});

describe("hostile envelopes", () => {
  it("not JSON, not an array, empty: 400 and nothing stored", async () => {
    const k = await fx.createKey();
    expect((await batch("[{", { key: k.key })).json()).toMatchObject({ error: "invalid_json" });
    const notArray = await batch(clientReport(), { key: k.key });
    expect(notArray.statusCode).toBe(400);
    expect(notArray.json()).toMatchObject({ error: "invalid_report" });
    expect((await batch("", { key: k.key })).statusCode).toBe(400);
    expect((await fx.records()).filter((r) => r.project_id === k.projectId)).toEqual([]);
  });

  it("a wrong media type is a 415 that names both types taken", async () => {
    for (const type of [
      "text/plain",
      "application/xml; charset=utf-8",
      "application/x-www-form-urlencoded",
    ]) {
      const res = await batch("[]", { type });
      expect(res.statusCode, type).toBe(415);
      expect(res.json()).toEqual({
        error: "unsupported_media_type",
        message: "send Content-Type: application/json or application/x-ndjson",
      });
    }
  });

  it("10 MB is a 413", async () => {
    const body = `[${Array.from({ length: 40_000 }, () => JSON.stringify(clientReport())).join(",")}]`;
    expect(body.length).toBeGreaterThan(10_000_000);
    const res = await batch(body);
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ error: "payload_too_large" });
  });

  it("a million tiny items is a 413, and so is one item over the count in a small body", async () => {
    const million = `[${"0,".repeat(999_999)}0]`;
    expect((await batch(million)).statusCode).toBe(413);
    const k = await fx.createKey();
    const over = await batch(`[${"{},".repeat(1_000)}{}]`, { key: k.key });
    expect(over.statusCode).toBe(413);
    expect(over.json().message).toMatch(/at most 1000 reports/);
    const lines = Array.from({ length: 1_001 }, () => "{}");
    const overLines = await batch(ndjson(lines), { key: k.key, type: "application/x-ndjson" });
    expect(overLines.statusCode).toBe(413);
  });

  it("deep nesting is that item's error, in an array and on an NDJSON line", async () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const good = JSON.stringify(clientReport());
    const res = await batch(`[${good},${deep},${good}]`);
    expect(res.statusCode).toBe(207);
    const { results } = res.json();
    expect(results[0]).toHaveProperty("id");
    expect(results[1]).toMatchObject({ error: "invalid_report", message: /nested deeper/ });
    expect(results[2]).toHaveProperty("id");
    const lines = await batch(ndjson([good, deep, good]), { type: "application/x-ndjson" });
    expect(lines.statusCode).toBe(207);
    expect(lines.json().results[1]).toMatchObject({ error: "invalid_report" });
  });

  it("brackets inside strings do not hide a deep item", async () => {
    const deepObj = `${'{"a":'.repeat(40)}1${"}".repeat(40)}`;
    const res = await batch(`[{"provider":"${"]".repeat(50)}","limits":{}},${deepObj}]`);
    expect(res.statusCode).toBe(207);
    expect(res.json().results[1]).toMatchObject({ error: "invalid_report", message: /nested/ });
  });
});
