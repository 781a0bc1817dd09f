import { afterAll, beforeAll, expect, it } from "vitest";
import { RpcStatus } from "../../src/otlp/otlp-schema.js";
import { type EdgeFixture, startEdge } from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { httpSpan, otlpExport, otlpProtobuf } from "../helpers/otlp-spans.js";

// Issue 47: POST /v1/traces under a batch's burst limit and quota. A provider span the burst
// limit refuses makes the whole export a 429 with Retry-After (an exporter retries it; a partial
// success it would drop), and the export sent again takes only what was refused: the spans taken
// the first time are duplicates, stored and counted once.

let fx: EdgeFixture;

beforeAll(async () => {
  fx = await startEdge();
});

afterAll(async () => {
  await fx?.close();
});

const OPENAI = { "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499" };

it("4 provider spans on a bucket of 2 and a quota of 4: a 429 with Retry-After, then the same export is taken whole, each span stored and counted once", async () => {
  const k = await fx.createKey({
    plan: "unlimited",
    overrides: { burst: 1, capacity: 2, monthly: 4 },
  });
  const body = otlpProtobuf(
    otlpExport([
      { service: "a", spans: Array.from({ length: 4 }, () => httpSpan("api.openai.com", OPENAI)) },
    ]),
  );
  const send = () =>
    fx.edge.app.inject({
      method: "POST",
      url: "/v1/traces",
      headers: { authorization: `Bearer ${k.key}`, "content-type": "application/x-protobuf" },
      payload: body,
    });
  const first = await send();
  expect(first.statusCode).toBe(429);
  expect(Number(first.headers["retry-after"])).toBeGreaterThan(0);
  const status = RpcStatus.toObject(RpcStatus.decode(first.rawPayload)) as {
    code: number;
    message: string;
  };
  expect(status.code).toBe(8);
  expect(status.message).toContain("send the export again");
  // The exporter's retries: until the bucket has refilled for the spans left.
  const last = await eventually(
    async () => {
      const res = await send();
      expect(res.statusCode).toBe(200);
      return res;
    },
    { timeoutMs: 15_000, intervalMs: 500 },
  );
  // No partial success: the quota of 4 had room for every span, so none was counted twice.
  expect(last.rawPayload.length).toBe(0);
  const records = (await fx.records()).filter((r) => r.project_id === k.projectId);
  expect(records).toHaveLength(4);
  expect(new Set(records.map((r) => r.report_id)).size).toBe(4);
}, 30_000);
