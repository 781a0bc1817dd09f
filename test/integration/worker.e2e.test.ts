import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NULL_LIMITS } from "../../fixtures/sample-reports.js";
import { createEdge, type Edge } from "../../src/edge/create-edge.js";
import { buildOpenApi } from "../../src/edge/openapi.js";
import { createLogger } from "../../src/lib/logger.js";
import type { IngestWorker } from "../../src/worker/create-ingest-worker.js";
import { uniqueId } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { type Pipeline, startIngestWorker, startPipeline } from "../helpers/pipeline.js";

// End to end: reports POSTed to the edge land in `reports` with every field as the contract
// normalises it, and in the rollups and the latest-limits view with the right figures.

// The key store lives in the shared test Redis: a project id of this run's own.
const PROJECT = `p-e2e-${uniqueId()}`;
let p: Pipeline;
let edge: Edge;
let worker: IngestWorker;
let key: string;
const logger = createLogger("silent", "test");

beforeAll(async () => {
  p = await startPipeline();
  edge = await createEdge(p.config, logger);
  worker = startIngestWorker(p, logger);
  ({ key } = await edge.keyStore.create(PROJECT, { defaultPlan: "unlimited" }));
});

afterAll(async () => {
  await worker?.close();
  await edge?.close();
  await p?.close();
});

async function post(body: unknown) {
  const res = await edge.app.inject({
    method: "POST",
    url: "/api/report",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { id: string }).id;
}

// Yesterday, 10:00 UTC: inside every retention window (the rollups' TTL is 30 days), whatever
// the date the suite runs on, and a whole day from the day boundaries.
const DAY = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
const at = (hhmmss: string, ms = "000") => Date.parse(`${DAY}T${hhmmss}.${ms}Z`);
/** ClickHouse's DateTime64(3) text for a time in ms. */
const chTime = (t: number) => new Date(t).toISOString().replace("T", " ").replace("Z", "");
const chMinute = (t: number) => chTime(t).slice(0, 19);
const T_FULL = at("10:00:00", "123");
const T_LATER = at("10:05:00");
const T_HINT = at("10:06:00");

const query = async <T>(sql: string) =>
  (await p.client.query({ query: sql, format: "JSONEachRow" })).json<T>();

describe("edge → queue → worker → ClickHouse", () => {
  it("serves its OpenAPI description at /openapi.json", async () => {
    const res = await edge.app.inject({ method: "GET", url: "/openapi.json" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(JSON.parse(JSON.stringify(buildOpenApi())));
  });

  it("stores every field as normalised, and keeps rollups and latest limits right", async () => {
    const full = await post({
      app: " chat ",
      provider: " OpenRouter",
      model: "deepseek/deepseek-r1",
      // 12:00:00.123456 at UTC+2: 10:00:00.123 UTC, cut to milliseconds.
      timestamp: `${DAY}T12:00:00.123456+02:00`,
      limits: {
        requests_limit: 1000,
        requests_remaining: 990.6,
        tokens_limit: 200000,
        tokens_remaining: 150000,
        reset_requests_ms: 60000,
        reset_tokens_ms: 1500,
      },
      credits: { credits_limit: 50, credits_remaining: 12.345678, request_cost: 0.000123 },
      extra_field: "ignored",
    });
    const later = await post({
      app: "chat",
      provider: "openrouter",
      model: "deepseek/deepseek-r1",
      timestamp: new Date(T_LATER).toISOString(),
      limits: {
        requests_limit: 1000,
        requests_remaining: 980,
        tokens_limit: 200000,
        tokens_remaining: 140000,
        reset_requests_ms: 59000,
        reset_tokens_ms: 1000,
      },
      credits: { credits_limit: 50, credits_remaining: 12.3, request_cost: 0.0002 },
    });
    // A provider hint after real figures: must not blank them out of the latest-limits view.
    const hint = await post({
      app: "chat",
      provider: "openrouter",
      model: "deepseek/deepseek-r1",
      timestamp: new Date(T_HINT).toISOString(),
      limits: NULL_LIMITS,
    });
    const startup = await post({
      provider: "anthropic",
      model: null,
      limits: NULL_LIMITS,
    });

    const rows = await eventually(
      async () => {
        const r = await query<Record<string, unknown>>(
          `SELECT * FROM ${p.db}.reports_v WHERE project_id = '${PROJECT}' ORDER BY report_id`,
        );
        expect(r).toHaveLength(4);
        return r;
      },
      { timeoutMs: 20_000 },
    );
    const byId = new Map(rows.map((r) => [r.report_id, r]));
    expect(byId.get(full)).toMatchObject({
      app: "chat",
      provider: "openrouter",
      model: "deepseek/deepseek-r1",
      timestamp: chTime(T_FULL),
      requests_limit: 1000,
      requests_remaining: 991,
      tokens_limit: 200000,
      tokens_remaining: 150000,
      reset_requests_ms: 60000,
      reset_tokens_ms: 1500,
      credits_limit: 50,
      credits_remaining: 12.345678,
      request_cost: 0.000123,
    });
    expect(byId.get(full)).not.toHaveProperty("extra_field");
    expect(String(byId.get(full)?.key_id)).toMatch(/^key_/);
    expect(byId.get(startup)).toMatchObject({
      app: "default",
      provider: "anthropic",
      model: "",
      requests_limit: null,
      credits_limit: null,
    });
    const startupRow = byId.get(startup) as { timestamp: string; received_at: string };
    expect(startupRow.timestamp).toBe(startupRow.received_at);
    expect(byId.get(hint)).toMatchObject({ requests_remaining: null, credits_remaining: null });
    expect(byId.get(later)).toBeDefined();

    const minute = await query<Record<string, unknown>>(
      `SELECT toString(bucket) AS bucket, reports, hints, requests_remaining_min, tokens_remaining_min,
        requests_limit_max, toString(cost_sum) AS cost, toString(credits_remaining_last) AS credits_last
       FROM ${p.db}.reports_minute_v WHERE project_id = '${PROJECT}' AND provider = 'openrouter' ORDER BY bucket`,
    );
    expect(minute).toEqual([
      {
        bucket: chMinute(T_FULL),
        reports: 1,
        hints: 0,
        requests_remaining_min: 991,
        tokens_remaining_min: 150000,
        requests_limit_max: 1000,
        cost: "0.000123",
        credits_last: "12.345678",
      },
      {
        bucket: chMinute(T_LATER),
        reports: 1,
        hints: 0,
        requests_remaining_min: 980,
        tokens_remaining_min: 140000,
        requests_limit_max: 1000,
        cost: "0.0002",
        credits_last: "12.3",
      },
      {
        bucket: chMinute(T_HINT),
        reports: 1,
        hints: 1,
        requests_remaining_min: null,
        tokens_remaining_min: null,
        requests_limit_max: null,
        cost: "0",
        credits_last: null,
      },
    ]);
    const daily = await query<Record<string, unknown>>(
      `SELECT reports, hints, toString(cost_sum) AS cost FROM ${p.db}.reports_daily_v
       WHERE project_id = '${PROJECT}' AND provider = 'openrouter'`,
    );
    expect(daily).toEqual([{ reports: 3, hints: 1, cost: "0.000323" }]);

    const latest = await query<Record<string, unknown>>(
      `SELECT provider, model, toString(last_seen) AS last_seen, toString(limits_at) AS limits_at,
        requests_remaining, tokens_remaining, toString(credits_remaining) AS credits_remaining
       FROM ${p.db}.latest_limits_v WHERE project_id = '${PROJECT}' ORDER BY provider`,
    );
    expect(latest).toEqual([
      {
        provider: "anthropic",
        model: "",
        last_seen: startupRow.timestamp,
        limits_at: null,
        requests_remaining: null,
        tokens_remaining: null,
        credits_remaining: null,
      },
      {
        provider: "openrouter",
        model: "deepseek/deepseek-r1",
        last_seen: chTime(T_HINT),
        limits_at: chTime(T_LATER),
        requests_remaining: 980,
        tokens_remaining: 140000,
        credits_remaining: "12.3",
      },
    ]);
  });
});
