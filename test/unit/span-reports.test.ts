import { describe, expect, it } from "vitest";
import { decodeTraces } from "../../src/otlp/decode-traces.js";
import { spanReportId, spanReports } from "../../src/otlp/span-reports.js";
import {
  hexId,
  httpSpan,
  otlpExport,
  otlpJson,
  otlpProtobuf,
  otlpSpan,
} from "../helpers/otlp-spans.js";

// Spans → reports (src/otlp/span-reports.ts), on exports decoded from both encodings.

const OPENAI = {
  "x-ratelimit-limit-requests": "500",
  "x-ratelimit-remaining-requests": "499",
  "x-ratelimit-reset-requests": "120ms",
};

const both = (request: Record<string, unknown>) => [
  spanReports(decodeTraces(otlpJson(request), "json")),
  spanReports(decodeTraces(otlpProtobuf(request), "protobuf")),
];

describe("spanReports", () => {
  it("makes an HTTP client span to a provider's host a report with its rate-limit headers, its end as the timestamp", () => {
    const end = Date.UTC(2026, 10, 1, 12, 0, 0, 250);
    const request = otlpExport([
      {
        service: "chat-app",
        spans: [
          httpSpan(
            "api.openai.com",
            { ...OPENAI, "set-cookie": "secret=1", "openai-organization": "org-1" },
            {
              endMs: end,
            },
          ),
        ],
      },
    ]);
    for (const out of both(request)) {
      expect(out.ignored).toBe(0);
      expect(out.reports).toHaveLength(1);
      const body = out.reports[0]?.body as Record<string, unknown>;
      expect(body).toMatchObject({
        provider: "openai",
        app: "chat-app",
        model: null,
        timestamp: "2026-11-01T12:00:00.250Z",
        limits: {},
      });
      // Only allowlisted names reach the report.
      expect(body.headers).toEqual(Object.entries(OPENAI));
      expect(body.id).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      );
    }
  });

  it("knows the providers' hosts, Azure OpenAI's by its suffix; other hosts' HTTP spans are ignored", () => {
    const hosts = {
      "api.anthropic.com": "anthropic",
      "api.groq.com": "groq",
      "generativelanguage.googleapis.com": "gemini",
      "api.mistral.ai": "mistral",
      "my-resource.openai.azure.com": "azure-openai",
    };
    const request = otlpExport([
      {
        service: "a",
        spans: [...Object.keys(hosts).map((h) => httpSpan(h, {})), httpSpan("example.com", OPENAI)],
      },
    ]);
    for (const out of both(request)) {
      expect(out.reports.map((r) => r.body.provider)).toEqual(Object.values(hosts));
      expect(out.ignored).toBe(1);
    }
  });

  it("makes a GenAI span and the HTTP span under it one report: the HTTP span's headers, the GenAI span's model", () => {
    const traceId = hexId(16);
    const genAi = otlpSpan({
      traceId,
      spanId: hexId(8),
      kind: 3,
      name: "chat gpt-4o",
      attributes: {
        "gen_ai.provider.name": "openai",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.usage.input_tokens": 12,
      },
    });
    const http = httpSpan("api.openai.com", OPENAI, {
      traceId,
      parentSpanId: genAi.spanId as string,
    });
    const request = otlpExport([{ service: "chat-app", spans: [http, genAi] }]);
    for (const out of both(request)) {
      expect(out.reports).toHaveLength(1);
      expect(out.merged).toBe(1);
      expect(out.reports[0]?.body).toMatchObject({
        provider: "openai",
        model: "gpt-4o-2024-08-06",
        headers: Object.entries(OPENAI),
      });
    }
  });

  it("gives the report the GenAI span's token usage, the conventions' names before the older ones", () => {
    const traceId = hexId(16);
    const genAi = otlpSpan({
      traceId,
      spanId: hexId(8),
      attributes: {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4",
        // The older name first, the newer after: the newer wins whatever the order.
        "gen_ai.usage.prompt_tokens": 99,
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.completion_tokens": 300,
        "gen_ai.usage.cache_read_input_tokens": 800,
      },
    });
    const http = httpSpan(
      "api.anthropic.com",
      {},
      { traceId, parentSpanId: genAi.spanId as string },
    );
    for (const out of both(otlpExport([{ service: "a", spans: [http, genAi] }]))) {
      expect(out.reports).toHaveLength(1);
      expect(out.reports[0]?.body.usage).toEqual({
        input_tokens: 1200,
        output_tokens: 300,
        cached_tokens: 800,
      });
    }
  });

  it("drops a usage count outside 0..1e9 or not a number, rounds a fraction, and sends no usage without a count", () => {
    const span = (attributes: Record<string, string | number>) =>
      otlpSpan({ attributes: { "gen_ai.provider.name": "deepseek", ...attributes } });
    const request = otlpExport([
      {
        service: "a",
        spans: [
          span({
            "gen_ai.usage.input_tokens": -1,
            "gen_ai.usage.output_tokens": 1_000_000_001,
            "gen_ai.usage.cache_read.input_tokens": "5",
          }),
          span({
            "gen_ai.usage.input_tokens": 1_000_000_000,
            "gen_ai.usage.output_tokens": 12.6,
            "gen_ai.usage.cache_read.input_tokens": 0,
          }),
          span({ "gen_ai.usage.reasoning_tokens": 7 }),
        ],
      },
    ]);
    for (const out of both(request)) {
      expect(out.reports.map((r) => r.body.usage)).toEqual([
        undefined,
        { input_tokens: 1_000_000_000, output_tokens: 13, cached_tokens: 0 },
        undefined,
      ]);
    }
  });

  it("takes the provider from a GenAI span above an HTTP span to a host it does not know (a gateway), two levels up", () => {
    const traceId = hexId(16);
    const genAi = otlpSpan({
      traceId,
      spanId: hexId(8),
      attributes: { "gen_ai.system": "az.ai.openai", "gen_ai.request.model": "gpt-4o" },
    });
    const middle = otlpSpan({ traceId, spanId: hexId(8), parentSpanId: genAi.spanId as string });
    const http = httpSpan("llm-gateway.internal", OPENAI, {
      traceId,
      parentSpanId: middle.spanId as string,
    });
    for (const out of both(otlpExport([{ service: "a", spans: [genAi, middle, http] }]))) {
      expect(out.reports).toHaveLength(1);
      expect(out.reports[0]?.body).toMatchObject({ provider: "azure-openai", model: "gpt-4o" });
      expect(out.ignored).toBe(1);
    }
  });

  it("makes a GenAI span with no HTTP span under it a report without figures (a hint)", () => {
    const genAi = otlpSpan({
      attributes: { "gen_ai.system": "anthropic", "gen_ai.request.model": "claude-sonnet-4" },
    });
    for (const out of both(otlpExport([{ service: "a", spans: [genAi] }]))) {
      expect(out.reports).toHaveLength(1);
      expect(out.reports[0]?.body).toMatchObject({
        provider: "anthropic",
        model: "claude-sonnet-4",
        limits: {},
      });
      expect(out.reports[0]?.body.headers).toBeUndefined();
    }
  });

  it("names the app `unknown` for a resource without service.name, or with the SDK's default", () => {
    const request = otlpExport([
      { service: null, spans: [httpSpan("api.openai.com", OPENAI)] },
      { service: "unknown_service:node", spans: [httpSpan("api.openai.com", OPENAI)] },
    ]);
    for (const out of both(request))
      expect(out.reports.map((r) => r.body.app)).toEqual(["unknown", "unknown"]);
  });

  it("takes a 429's JSON error body from the span's exception event", () => {
    const error = { error: { code: 429, status: "RESOURCE_EXHAUSTED", details: [] } };
    const span = httpSpan(
      "generativelanguage.googleapis.com",
      {},
      {
        status: 429,
        events: [
          {
            name: "exception",
            attributes: { "exception.message": `got status: 429. ${JSON.stringify(error)}` },
          },
        ],
      },
    );
    for (const out of both(otlpExport([{ service: "a", spans: [span] }])))
      expect(out.reports[0]?.body.error).toEqual(error);
  });

  it("refuses a provider call's span without valid ids, and counts every other span as ignored", () => {
    const spans = [
      httpSpan("api.openai.com", OPENAI, { spanId: "0000000000000000" }),
      ...Array.from({ length: 5 }, () => otlpSpan({ name: "db.query" })),
    ];
    for (const out of both(otlpExport([{ service: "a", spans }]))) {
      expect(out.reports).toHaveLength(0);
      expect(out.rejected.count).toBe(1);
      expect(out.ignored).toBe(5);
    }
  });
});

describe("spanReportId", () => {
  it("is the same for the same trace and span ids, and differs for another span", () => {
    const traceId = Buffer.alloc(16, 7);
    const spanId = Buffer.alloc(8, 9);
    const a = spanReportId({ traceId, spanId, endTimeUnixNano: "1764000000000000000" });
    expect(a).toBe(spanReportId({ traceId, spanId, endTimeUnixNano: "1764000000000000000" }));
    expect(a).not.toBe(
      spanReportId({ traceId, spanId: Buffer.alloc(8, 8), endTimeUnixNano: "1764000000000000000" }),
    );
    // UUIDv7's layout: the span's end (2025-11-24T16:00:00Z) in its first 48 bits.
    expect(a?.slice(0, 13)).toBe("019ab697-e800");
    expect(spanReportId({ traceId: Buffer.alloc(16), spanId, endTimeUnixNano: "1" })).toBeNull();
  });
});
