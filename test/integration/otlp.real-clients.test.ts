import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Context, SpanKind, trace } from "@opentelemetry/api";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { Agent, fetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../helpers/eventually.js";
import { httpSpan, otlpExport, otlpJson } from "../helpers/otlp-spans.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// Issue 47 with real clients: an application instrumented with the OpenTelemetry Node SDK (the
// undici instrumentation recording the providers' rate-limit response headers) calls a stand-in
// for the OpenAI and Anthropic APIs on 127.0.0.1 (an undici Agent resolves api.openai.com and
// api.anthropic.com there, so the spans name the providers' hosts); its traces go to the edge's
// POST /v1/traces through both OTLP exporters, gzip on and off, and /api/v1/headroom then shows
// the windows the headers state.

const OPENAI = {
  "x-ratelimit-limit-requests": "500",
  "x-ratelimit-remaining-requests": "499",
  "x-ratelimit-reset-requests": "120ms",
  "x-ratelimit-limit-tokens": "30000",
  "x-ratelimit-remaining-tokens": "29000",
  "x-ratelimit-reset-tokens": "2s",
};
const anthropic = () => {
  const reset = `${new Date(Date.now() + 60_000).toISOString().slice(0, 19)}Z`;
  return {
    "anthropic-ratelimit-requests-limit": "1000",
    "anthropic-ratelimit-requests-remaining": "998",
    "anthropic-ratelimit-requests-reset": reset,
    "anthropic-ratelimit-input-tokens-limit": "80000",
    "anthropic-ratelimit-input-tokens-remaining": "8000",
    "anthropic-ratelimit-input-tokens-reset": reset,
  };
};
/** What the application asks the instrumentation to record (docs/opentelemetry.md's list). */
const RECORDED = [...Object.keys(OPENAI), ...Object.keys(anthropic()), "retry-after", "set-cookie"];

/** The span processors of the test running now: each test exports to its own projects. */
class Current implements SpanProcessor {
  targets: SpanProcessor[] = [];
  onStart(span: Span, context: Context) {
    for (const t of this.targets) t.onStart(span, context);
  }
  onEnd(span: ReadableSpan) {
    for (const t of this.targets) t.onEnd(span);
  }
  async forceFlush() {
    await Promise.all(this.targets.map((t) => t.forceFlush()));
  }
  async shutdown() {
    await Promise.all(this.targets.map((t) => t.shutdown()));
  }
}

let s: ReadStack;
let edgeUrl: string;
let api: Server;
let apiPort: number;
const current = new Current();
let provider: NodeTracerProvider;
const agent = new Agent({
  connect: {
    // The providers' hosts are this machine: the URL (and so the span) keeps their names.
    lookup: (_host, opts, cb) =>
      (opts as { all?: boolean }).all
        ? (cb as (e: null, a: { address: string; family: number }[]) => void)(null, [
            { address: "127.0.0.1", family: 4 },
          ])
        : cb(null, "127.0.0.1", 4),
  },
});

beforeAll(async () => {
  s = await startReadStack();
  await s.edge.app.listen({ port: 0, host: "127.0.0.1" });
  edgeUrl = `http://127.0.0.1:${(s.edge.app.server.address() as AddressInfo).port}`;
  api = createServer((req, res) => {
    req.resume();
    const headers = req.url?.startsWith("/v1/messages") ? anthropic() : OPENAI;
    res.writeHead(200, { ...headers, "content-type": "application/json", "set-cookie": "s=1" });
    res.end('{"id":"x"}');
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  apiPort = (api.address() as AddressInfo).port;
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": "chat-app" }),
    spanProcessors: [current],
  });
  provider.register();
  registerInstrumentations({
    instrumentations: [
      new UndiciInstrumentation({ headersToSpanAttributes: { responseHeaders: RECORDED } }),
    ],
  });
}, 120_000);

afterAll(async () => {
  await provider?.shutdown();
  await agent.close();
  api?.close();
  await s?.close();
});

type Encoding = "protobuf" | "json";
function exporter(key: string, encoding: Encoding, gzip: boolean): SpanExporter {
  const options = {
    url: `${edgeUrl}/v1/traces`,
    headers: { Authorization: `Bearer ${key}` },
    compression: (gzip ? "gzip" : "none") as never,
  };
  return encoding === "protobuf" ? new ProtoExporter(options) : new JsonExporter(options);
}

const callOpenAi = async () => {
  const res = await fetch(`http://api.openai.com:${apiPort}/v1/chat/completions`, {
    method: "POST",
    body: "{}",
    dispatcher: agent,
  });
  await res.text();
};
const callAnthropic = async () => {
  const res = await fetch(`http://api.anthropic.com:${apiPort}/v1/messages`, {
    method: "POST",
    body: "{}",
    dispatcher: agent,
  });
  await res.text();
};

/** Runs `calls` with `targets` receiving the spans, then exports them all. */
async function traced(targets: SpanProcessor[], calls: () => Promise<void>) {
  current.targets = targets;
  try {
    await calls();
    await current.forceFlush();
  } finally {
    current.targets = [];
  }
}

interface WindowOut {
  dimension: string;
  limit: number | null;
  remaining: number | null;
}

async function windows(k: ProjectKeys): Promise<Map<string, WindowOut[]>> {
  const res = await s.get("/api/v1/headroom", k.read);
  expect(res.statusCode, res.body).toBe(200);
  const { series } = res.json() as { series: { provider: string; windows: WindowOut[] }[] };
  return new Map(series.map((x) => [x.provider, x.windows]));
}

const COMBINATIONS: [Encoding, boolean][] = [
  ["protobuf", true],
  ["protobuf", false],
  ["json", true],
  ["json", false],
];

describe("POST /v1/traces with the OpenTelemetry Node SDK", () => {
  it("both exporters, gzip on and off: /api/v1/headroom shows the windows OpenAI's and Anthropic's headers state", async () => {
    const projects = await Promise.all(COMBINATIONS.map(() => s.project()));
    await traced(
      COMBINATIONS.map(
        ([encoding, gzip], i) =>
          new BatchSpanProcessor(exporter((projects[i] as ProjectKeys).report, encoding, gzip)),
      ),
      async () => {
        await callOpenAi();
        await callAnthropic();
      },
    );
    for (const k of projects) {
      await s.stored(k.project, 2);
      const byProvider = await eventually(
        async () => {
          const w = await windows(k);
          expect([...w.keys()].sort()).toEqual(["anthropic", "openai"]);
          return w;
        },
        { timeoutMs: 20_000, intervalMs: 250 },
      );
      expect(byProvider.get("openai")).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ dimension: "requests", limit: 500, remaining: 499 }),
          expect.objectContaining({ dimension: "tokens", limit: 30_000, remaining: 29_000 }),
        ]),
      );
      expect(byProvider.get("anthropic")).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ dimension: "requests", limit: 1000, remaining: 998 }),
          expect.objectContaining({ dimension: "input_tokens", limit: 80_000, remaining: 8000 }),
        ]),
      );
      const rows = await s.sql<{ app: string; headers: string }>(
        `SELECT app, headers FROM ${s.p.db}.reports_v WHERE project_id = {p:String}`,
        { p: k.project },
      );
      expect(rows.map((r) => r.app)).toEqual(["chat-app", "chat-app"]);
      // Recorded by the instrumentation, dropped at the edge: no cookie is stored.
      for (const r of rows) expect(r.headers).not.toContain("set-cookie");
    }
  }, 120_000);

  it("a GenAI span made with the SDK's API, the undici span under it: one report with the GenAI span's model and token usage", async () => {
    const k = await s.project();
    await traced([new BatchSpanProcessor(exporter(k.report, "protobuf", true))], async () => {
      const tracer = trace.getTracer("genai-app");
      await tracer.startActiveSpan(
        "chat gpt-4o",
        {
          kind: SpanKind.CLIENT,
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
          },
        },
        async (span) => {
          await callOpenAi();
          span.setAttributes({
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.output_tokens": 30,
            "gen_ai.usage.cache_read.input_tokens": 8,
          });
          span.end();
        },
      );
    });
    await s.stored(k.project, 1);
    const rows = await s.sql<{ provider: string; model: string; headers: string }>(
      `SELECT provider, model, headers, usage_input_tokens, usage_output_tokens, usage_cached_tokens
         FROM ${s.p.db}.reports_v WHERE project_id = {p:String}`,
      { p: k.project },
    );
    expect(rows).toHaveLength(1);
    // The GenAI span's token counts are the report's usage (issue 45's usage columns).
    expect(rows[0]).toMatchObject({
      provider: "openai",
      model: "gpt-4o-2024-08-06",
      usage_input_tokens: 12,
      usage_output_tokens: 30,
      usage_cached_tokens: 8,
    });
    expect(JSON.parse(rows[0]?.headers as string)).toMatchObject({
      "x-ratelimit-limit-requests": "500",
    });
  }, 120_000);

  it("the same export sent 3 times (an exporter's retry) is stored once and counts once against the quota", async () => {
    const project = `r-otlp-quota-${Date.now()}`;
    await s.edge.keyStore.createProject(project, "unlimited", { monthly: 3 });
    const make = async (scope: "report" | "read") =>
      (await s.edge.keyStore.create(project, { defaultPlan: "unlimited", scope })).key;
    const k: ProjectKeys = { project, report: await make("report"), read: await make("read") };
    const memory = new InMemorySpanExporter();
    await traced([new SimpleSpanProcessor(memory)], async () => {
      await callOpenAi();
      await callAnthropic();
    });
    const spans = memory.getFinishedSpans();
    const send = exporter(k.report, "protobuf", false);
    for (let i = 0; i < 3; i++) {
      const code = await new Promise<number>((resolve) =>
        send.export(spans, (r) => resolve(r.code)),
      );
      expect(code).toBe(0);
    }
    await s.stored(k.project, 2);
    // Two more provider calls: the quota of 3 has one left, so one is refused, not both.
    const more = otlpExport([
      {
        service: "chat-app",
        spans: [httpSpan("api.openai.com", OPENAI), httpSpan("api.anthropic.com", anthropic())],
      },
    ]);
    const res = await globalThis.fetch(`${edgeUrl}/v1/traces`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.report}`, "content-type": "application/json" },
      body: otlpJson(more),
    });
    const answer = (await res.json()) as {
      partialSuccess?: { rejectedSpans: string; errorMessage: string };
    };
    expect(res.status).toBe(200);
    expect(answer.partialSuccess?.rejectedSpans).toBe("1");
    expect(answer.partialSuccess?.errorMessage).toContain("quota_exceeded");
    await s.stored(k.project, 3);
    await send.shutdown();
  }, 120_000);
});
