import { describe, expect, it } from "vitest";
import { CLIENT_LIMITS, NULL_LIMITS } from "../../fixtures/sample-reports.js";
import type { PostOptions } from "../helpers/edge-fixture.js";
import {
  clientReport,
  type EdgeFixture,
  sharedEdge,
  type TestKey,
  UUID_V7,
} from "../helpers/edge-fixture.js";
import { NULL_CREDITS } from "../helpers/report-oracle.js";

// The real client's payloads are accepted and normalised as docs/report-api.md says; each 200 is
// checked against the report as it sits in the queue, field by field.

// Yesterday: inside the retention window on whatever date the suite runs.
const DAY = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
let fx: EdgeFixture;
let k: TestKey;
sharedEdge((shared) => ({ fx, k } = shared));

/** Posts, expects a 200 `{"id"}`, and returns the queued record with that report id. */
async function accept(body: unknown, opts: PostOptions = {}) {
  const before = Date.now();
  const res = await fx.post(body, { key: k.key, ...opts });
  const after = Date.now();
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const parsed = res.json() as { id: string };
  expect(Object.keys(parsed)).toEqual(["id"]);
  expect(parsed.id).toMatch(UUID_V7);

  const matching = (await fx.records()).filter((r) => r.report_id === parsed.id);
  expect(matching).toHaveLength(1);
  const record = matching[0];
  if (!record) throw new Error("unreachable");
  const receivedAt = Date.parse(record.received_at);
  expect(receivedAt).toBeGreaterThanOrEqual(before);
  expect(receivedAt).toBeLessThanOrEqual(after);
  // UUIDv7: the first 48 bits are the creation time in ms.
  const idMs = Number.parseInt(parsed.id.replaceAll("-", "").slice(0, 12), 16);
  // Made just after the receive time, within the request (not "within 5 ms": a GC pause is
  // longer than that on a loaded machine).
  expect(idMs).toBeGreaterThanOrEqual(receivedAt);
  expect(idMs).toBeLessThanOrEqual(after);
  return record;
}

/** The server's fields of a record that `accept` returned. */
const server = (r: { report_id: string; received_at: string }) => ({
  report_id: r.report_id,
  project_id: k.projectId,
  key_id: k.keyId,
  received_at: r.received_at,
});

describe("POST /api/report: accepted reports", () => {
  it("stores a full client report as sent", async () => {
    const body = clientReport({ timestamp: `${DAY}T05:06:07.089Z` });
    const r = await accept(body);
    expect(r).toStrictEqual({
      ...server(r),
      app: "chat-api",
      provider: "openai",
      model: "gpt-4o-mini",
      timestamp: `${DAY}T05:06:07.089Z`,
      ...CLIENT_LIMITS,
      ...NULL_CREDITS,
    });
  });

  it("accepts the start-up provider hint: model null, every limit null, no credits key", async () => {
    const hint = {
      app: "chat-api",
      provider: "anthropic",
      model: null,
      timestamp: `${DAY}T05:06:07.000Z`,
      limits: NULL_LIMITS,
    };
    const r = await accept(hint);
    expect(r).toStrictEqual({
      ...server(r),
      app: "chat-api",
      provider: "anthropic",
      model: null,
      timestamp: `${DAY}T05:06:07.000Z`,
      ...NULL_LIMITS,
      ...NULL_CREDITS,
    });
  });

  it("stores credit figures exactly", async () => {
    const r = await accept(
      clientReport({
        credits: { credits_limit: 100, credits_remaining: 42.123456, request_cost: 0.0000123 },
      }),
    );
    expect(r.credits_limit).toBe(100);
    expect(r.credits_remaining).toBe(42.123456);
    expect(r.request_cost).toBe(0.0000123);
  });

  it("keeps a partly null credits object as sent", async () => {
    const r = await accept(
      clientReport({
        credits: { credits_limit: null, credits_remaining: 5.5, request_cost: null },
      }),
    );
    expect({
      credits_limit: r.credits_limit,
      credits_remaining: r.credits_remaining,
      request_cost: r.request_cost,
    }).toStrictEqual({ credits_limit: null, credits_remaining: 5.5, request_cost: null });
  });

  it("stores credits whose three fields are all null as no credits, like credits: null", async () => {
    const allNull = await accept(clientReport({ credits: NULL_CREDITS }));
    const nullCredits = await accept(clientReport({ credits: null }));
    const { credits: _omit, ...withoutCredits } = clientReport();
    const absent = await accept(withoutCredits);
    for (const r of [allNull, nullCredits, absent]) {
      expect({
        credits_limit: r.credits_limit,
        credits_remaining: r.credits_remaining,
        request_cost: r.request_cost,
      }).toStrictEqual(NULL_CREDITS);
    }
  });

  it("rounds fractional limits to the nearest integer", async () => {
    const r = await accept(
      clientReport({
        limits: {
          requests_limit: 100.4,
          requests_remaining: 99.5,
          tokens_limit: 0.49,
          tokens_remaining: 1999.9,
          reset_requests_ms: 1234.5678,
          reset_tokens_ms: null,
        },
      }),
    );
    expect(r).toMatchObject({
      requests_limit: 100,
      requests_remaining: 100,
      tokens_limit: 0,
      tokens_remaining: 2000,
      reset_requests_ms: 1235,
      reset_tokens_ms: null,
    });
  });

  it("treats missing limit fields as null", async () => {
    const r = await accept(clientReport({ limits: { requests_remaining: 7 } }));
    expect(r).toMatchObject({ ...NULL_LIMITS, requests_remaining: 7 });
  });

  it("trims and lowercases the provider, trims the app", async () => {
    const r = await accept(clientReport({ provider: "  Azure-OpenAI \t", app: "  billing  " }));
    expect(r.provider).toBe("azure-openai");
    expect(r.app).toBe("billing");
  });

  it("accepts any non-empty provider and non-ASCII model names unchanged", async () => {
    const r = await accept(clientReport({ provider: "my-own-gateway", model: "модель-🚀 v2" }));
    expect(r.provider).toBe("my-own-gateway");
    expect(r.model).toBe("модель-🚀 v2");
  });

  it.each([
    [`${DAY}T12:34:56.789+02:00`, `${DAY}T10:34:56.789Z`],
    [`${DAY}T01:00:00.000-05:30`, `${DAY}T06:30:00.000Z`],
    [`${DAY}T10:00:00.123456Z`, `${DAY}T10:00:00.123Z`],
    [`${DAY}T10:00:00.999999+01:00`, `${DAY}T09:00:00.999Z`],
    [`${DAY}T10:00:00Z`, `${DAY}T10:00:00.000Z`],
    [`${DAY}T10:00:00.5Z`, `${DAY}T10:00:00.500Z`],
  ])("normalises timestamp %s to UTC milliseconds", async (sent, stored) => {
    const r = await accept(clientReport({ timestamp: sent }));
    expect(r.timestamp).toBe(stored);
  });

  it.each([
    ["missing", undefined],
    ["null", null],
    ["empty", ""],
    ["blank", "   "],
  ])('stores app "default" when it is %s', async (_name, app) => {
    const body = clientReport();
    if (app === undefined) delete body.app;
    else body.app = app;
    const r = await accept(body);
    expect(r.app).toBe("default");
  });

  it.each([
    ["missing", undefined],
    ["null", null],
  ])("uses the server's receive time when the timestamp is %s", async (_name, timestamp) => {
    const body = clientReport();
    if (timestamp === undefined) delete body.timestamp;
    else body.timestamp = timestamp;
    const r = await accept(body);
    expect(r.timestamp).toBe(r.received_at);
  });

  it("treats a missing model as null", async () => {
    const body = clientReport();
    delete body.model;
    const r = await accept(body);
    expect(r.model).toBeNull();
  });

  it("ignores unknown fields, top-level and nested, and never stores them", async () => {
    const marker = "unknown-field-marker-7c1e";
    const body = clientReport({
      sdk_version: marker,
      extra: { nested: [marker, { deeper: marker }] },
      limits: { ...(clientReport().limits as object), [`${marker}_limit`]: 5 },
      credits: { credits_limit: 10, credits_remaining: 9, request_cost: 1, currency: marker },
    });
    const r = await accept(body);
    expect(Object.keys(r).sort()).toStrictEqual(
      [
        "report_id",
        "project_id",
        "key_id",
        "app",
        "provider",
        "model",
        "timestamp",
        "received_at",
        ...Object.keys(NULL_LIMITS),
        ...Object.keys(NULL_CREDITS),
      ].sort(),
    );
    const jobs = await fx.edge.queue.getJobs(["wait"]);
    const raw = JSON.stringify(jobs.map((j) => j.data));
    expect(raw).toContain(r.report_id);
    expect(raw).not.toContain(marker);
  });

  it("ignores the query string", async () => {
    const r = await accept(clientReport({ provider: "mistral" }), {
      url: "/api/report?provider=evil&app=evil&project=other",
    });
    expect(r.provider).toBe("mistral");
    expect(r.app).toBe("chat-api");
    expect(r.project_id).toBe(k.projectId);
  });

  it("accepts application/json with a utf-8 charset parameter", async () => {
    const r = await accept(clientReport({ provider: "groq" }), {
      headers: { "content-type": "application/json; charset=UTF-8" },
    });
    expect(r.provider).toBe("groq");
  });

  it("gives every report its own time-ordered id", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await accept(clientReport())).report_id);
    expect(new Set(ids).size).toBe(5);
    expect([...ids].sort()).toStrictEqual(ids);
  });
});
