import { gzipSync } from "node:zlib";
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExportTraceServiceResponse, RpcStatus } from "../../src/otlp/otlp-schema.js";
import {
  hexId,
  httpSpan,
  otlpExport,
  otlpJson,
  otlpProtobuf,
  otlpSpan,
} from "../helpers/otlp-spans.js";
import { type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Issue 47, hostile and broken input to POST /v1/traces, through the real edge and worker: each
// gets a clear OTLP answer (an ExportTraceServiceResponse, or a google.rpc.Status in the request's
// encoding), never a 500, and the valid provider spans of the same request are all stored.

let s: ReadStack;

beforeAll(async () => {
  // A small OTLP body limit, so that "over the limit" is cheap to send.
  s = await startReadStack({ OTLP_LIMIT_BYTES: String(2 * 1024 * 1024) });
}, 120_000);

afterAll(async () => {
  await s?.close();
});

const OPENAI = { "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499" };

function post(
  key: string | null,
  body: Buffer | string,
  contentType = "application/x-protobuf",
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return s.edge.app.inject({
    method: "POST",
    url: "/v1/traces",
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      "content-type": contentType,
      ...headers,
    },
    payload: body,
  });
}

const status = (res: LightMyRequestResponse) =>
  RpcStatus.toObject(RpcStatus.decode(res.rawPayload)) as { code: number; message: string };
const response = (res: LightMyRequestResponse) =>
  ExportTraceServiceResponse.toObject(ExportTraceServiceResponse.decode(res.rawPayload), {
    longs: Number,
  }) as { partialSuccess?: { rejectedSpans?: number; errorMessage?: string } };

async function rows(project: string) {
  return s.sql<{ provider: string; app: string; model: string; headers: string | null }>(
    `SELECT provider, app, model, headers FROM ${s.p.db}.reports_v WHERE project_id = {p:String} ORDER BY provider`,
    { p: project },
  );
}

describe("POST /v1/traces, hostile and broken input", () => {
  it("a truncated protobuf body: 400 with a protobuf Status, nothing stored", async () => {
    const k = await s.project();
    const body = otlpProtobuf(
      otlpExport([{ service: "a", spans: [httpSpan("api.openai.com", OPENAI)] }]),
    );
    const res = await post(k.report, body.subarray(0, body.length - 7));
    expect(res.statusCode).toBe(400);
    expect(res.headers["content-type"]).toBe("application/x-protobuf");
    expect(status(res)).toMatchObject({ code: 3 });
    expect(status(res).message).toContain("not an OTLP ExportTraceServiceRequest");
    // An empty body: an empty export in protobuf (every field optional), no JSON at all.
    const empty = await post(k.report, Buffer.alloc(0));
    expect(empty.statusCode).toBe(200);
    expect(empty.rawPayload.length).toBe(0);
    expect((await post(k.report, "", "application/json")).statusCode).toBe(400);
    // JSON that is no export, and JSON that is no JSON: the same 400, as JSON.
    for (const junk of [
      '{"resourceSpans":{}}',
      "{not json",
      '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}',
    ]) {
      const j = await post(k.report, junk, "application/json");
      expect(j.statusCode, junk).toBe(400);
      expect(j.json()).toMatchObject({ code: 3 });
    }
  });

  it("a wrong content type, a wrong content encoding: 415", async () => {
    const k = await s.project();
    const res = await post(k.report, "spans", "text/plain");
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ error: "unsupported_media_type" });
    const br = await post(k.report, Buffer.from("x"), "application/x-protobuf", {
      "content-encoding": "br",
    });
    expect(br.statusCode).toBe(415);
    expect(status(br).message).toContain("Content-Encoding");
  });

  it("no key, a read key: 401 and 403 as Status in the request's encoding", async () => {
    const k = await s.project();
    const body = otlpJson(
      otlpExport([{ service: "a", spans: [httpSpan("api.openai.com", OPENAI)] }]),
    );
    const none = await post(null, body, "application/json");
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ code: 16 });
    const read = await post(k.read, body, "application/json");
    expect(read.statusCode).toBe(403);
    expect(read.json()).toMatchObject({ code: 7 });
  });

  it("10,000 spans of which 3 are provider calls: 3 reports, the rest counted as ignored", async () => {
    const k = await s.project();
    const before = await ignoredSpans();
    const spans = Array.from({ length: 10_000 }, (_, i) =>
      i === 17 || i === 5000 || i === 9999
        ? httpSpan("api.openai.com", OPENAI)
        : otlpSpan({ name: `db.query ${i}`, attributes: { "db.system": "postgresql" } }),
    );
    const res = await post(
      k.report,
      gzipSync(otlpProtobuf(otlpExport([{ service: "big", spans }]))),
      "application/x-protobuf",
      { "content-encoding": "gzip" },
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(response(res).partialSuccess).toBeUndefined();
    await s.stored(k.project, 3);
    expect(await ignoredSpans()).toBe(before + 9997);
  }, 60_000);

  it("header values past the bounds are dropped, the span's other headers kept; a warning, nothing rejected", async () => {
    const k = await s.project();
    const span = httpSpan("api.openai.com", {
      ...OPENAI,
      "x-ratelimit-limit-tokens": "9".repeat(513),
    });
    const res = await post(k.report, otlpProtobuf(otlpExport([{ service: "a", spans: [span] }])));
    expect(res.statusCode).toBe(200);
    expect(response(res).partialSuccess).toMatchObject({ rejectedSpans: 0 });
    expect(response(res).partialSuccess?.errorMessage).toContain("512");
    await s.stored(k.project, 1);
    const [row] = await rows(k.project);
    expect(JSON.parse(row?.headers as string)).toEqual(OPENAI);
  });

  it("a provider host without headers (a hint), a resource without service.name (app unknown), and refused spans: the valid ones all stored", async () => {
    const k = await s.project();
    const request = otlpExport([
      { service: null, spans: [httpSpan("api.anthropic.com", {})] },
      {
        service: "chat",
        spans: [
          httpSpan("api.groq.com", { "x-ratelimit-limit-requests": "14400" }),
          // Refused: no valid span id; a provider name over 64 characters.
          httpSpan("api.openai.com", OPENAI, { spanId: "0000000000000000" }),
          otlpSpan({ attributes: { "gen_ai.provider.name": "x".repeat(65) } }),
        ],
      },
    ]);
    const res = await post(k.report, otlpJson(request), "application/json");
    expect(res.statusCode).toBe(200);
    const answer = res.json() as {
      partialSuccess: { rejectedSpans: string; errorMessage: string };
    };
    expect(answer.partialSuccess.rejectedSpans).toBe("2");
    await s.stored(k.project, 2);
    expect(await rows(k.project)).toEqual([
      // reports_v shows no model as "".
      { provider: "anthropic", app: "unknown", model: "", headers: null },
      {
        provider: "groq",
        app: "chat",
        model: "",
        headers: JSON.stringify({ "x-ratelimit-limit-requests": "14400" }),
      },
    ]);
  });

  it("a body over OTLP_LIMIT_BYTES, sent or once unzipped: 413", async () => {
    const k = await s.project();
    const over = Buffer.alloc(2 * 1024 * 1024 + 1, 0x0a);
    const res = await post(k.report, over);
    expect(res.statusCode).toBe(413);
    expect(status(res)).toMatchObject({ code: 3 });
    // 3 MB of zeros zip to a few KB: the unzipped size is what counts.
    const bomb = await post(
      k.report,
      gzipSync(Buffer.alloc(3 * 1024 * 1024)),
      "application/x-protobuf",
      {
        "content-encoding": "gzip",
      },
    );
    expect(bomb.statusCode).toBe(413);
    expect(status(bomb).message).toContain("unzipped");
  });

  it("an export with the same span twice (ids repeated): one report, answered as taken", async () => {
    const k = await s.project();
    const span = httpSpan("api.openai.com", OPENAI, { traceId: hexId(16), spanId: hexId(8) });
    const res = await post(
      k.report,
      otlpProtobuf(otlpExport([{ service: "a", spans: [span, span] }])),
    );
    expect(res.statusCode).toBe(200);
    expect(response(res).partialSuccess).toBeUndefined();
    await s.stored(k.project, 1);
  });
});

async function ignoredSpans(): Promise<number> {
  const text = await s.edge.app
    .inject({ method: "GET", url: "/metrics" })
    .then((r: LightMyRequestResponse) => r.body);
  const line = /^headroom_otlp_spans_total\{outcome="ignored"\} (\d+)$/m.exec(text);
  return line ? Number(line[1]) : 0;
}
