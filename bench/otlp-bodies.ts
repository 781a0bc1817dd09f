import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ExportTraceServiceRequest } from "../src/otlp/otlp-schema.js";
import type { LoadFiles } from "./report-bodies.js";

// Phase 2c's bodies: OTLP/HTTP protobuf trace exports of `spans` spans, half of them provider
// calls (HTTP client spans to api.openai.com carrying OpenAI's rate-limit response headers as
// `http.response.header.*`, as the undici instrumentation records them), half ordinary spans (a
// server span and internal ones). Encoded once, by protobufjs over the repository's own .proto
// files (src/otlp/otlp-schema.ts).
//
// Every span's trace id begins with the same 8 random bytes (the marker); wrk-report.lua puts a
// fresh 8 bytes there in every request, so that each export's spans have ids never sent before:
// the edge takes a report id from a span's ids, and an export sent again is the exporter-retry
// path (duplicates, no enqueue), not the normal one. The file is binary: 4 random bytes (the
// salt of the phase's ids, whose last 2 each wrk replaces by its edge's port; the 4 after it are
// the request's number) and a newline, then per template, a line with its number of parts, then each part as a line with its length and its bytes; the request
// is the parts joined by the request's 8 bytes.

export const OTLP_PATH = "/v1/traces";
/** Marks the bodies file as templates of parts for wrk-report.lua. */
export const OTLP_BODIES_SUFFIX = ".otlp-parts";

/** OpenAI's rate-limit response headers, as api.openai.com sends them. */
const OPENAI_HEADERS: Record<string, string> = {
  "x-ratelimit-limit-requests": "10000",
  "x-ratelimit-limit-tokens": "30000000",
  "x-ratelimit-remaining-requests": "9999",
  "x-ratelimit-remaining-tokens": "29999000",
  "x-ratelimit-reset-requests": "6ms",
  "x-ratelimit-reset-tokens": "2ms",
  "x-request-id": "req_0123456789abcdef0123456789abcdef",
  "openai-processing-ms": "412",
};

type Attr = string | number | string[];

const anyValue = (v: Attr) =>
  Array.isArray(v)
    ? { arrayValue: { values: v.map((s) => ({ stringValue: s })) } }
    : typeof v === "string"
      ? { stringValue: v }
      : { intValue: v };

const attributes = (attrs: Record<string, Attr>) =>
  Object.entries(attrs).map(([key, value]) => ({ key, value: anyValue(value) }));

/** One export of `spans` spans, `providerShare` of them provider calls; ids after the marker. */
function exportOf(
  template: number,
  spans: number,
  marker: Buffer,
  endMs: number,
): Record<string, unknown> {
  const end = BigInt(endMs) * 1_000_000n;
  const providerCalls = Math.floor(spans / 2);
  const list = Array.from({ length: spans }, (_, i) => {
    const tail = Buffer.alloc(8);
    tail.writeUInt32BE(template + 1, 0);
    tail.writeUInt32BE(i + 1, 4);
    const common = {
      traceId: Buffer.concat([marker, tail]),
      spanId: tail,
      startTimeUnixNano: (end - 412_000_000n).toString(),
      endTimeUnixNano: end.toString(),
    };
    if (i < providerCalls) {
      const attrs: Record<string, Attr> = {
        "http.request.method": "POST",
        "server.address": "api.openai.com",
        "server.port": 443,
        "url.full": "https://api.openai.com/v1/chat/completions",
        "http.response.status_code": 200,
      };
      for (const [name, value] of Object.entries(OPENAI_HEADERS))
        attrs[`http.response.header.${name}`] = [value];
      return { ...common, name: "POST", kind: 3, attributes: attributes(attrs) };
    }
    // Ordinary spans: what an app's traces are mostly made of.
    return i === providerCalls
      ? {
          ...common,
          name: "POST /chat",
          kind: 2,
          attributes: attributes({
            "http.request.method": "POST",
            "http.route": "/chat",
            "http.response.status_code": 200,
            "url.path": "/chat",
          }),
        }
      : {
          ...common,
          name: `render step ${i}`,
          kind: 1,
          attributes: attributes({ "code.function": "render", "app.step": i }),
        };
  });
  return {
    resourceSpans: [
      {
        resource: {
          attributes: attributes({
            "service.name": `bench-app-${template % 4}`,
            "telemetry.sdk.language": "nodejs",
          }),
        },
        scopeSpans: [{ scope: { name: "@opentelemetry/instrumentation-undici" }, spans: list }],
      },
    ],
  };
}

/** The protobuf of one export, cut at each trace id's marker. */
export function otlpTemplateParts(
  template: number,
  spans: number,
  marker: Buffer,
  endMs: number,
): Buffer[] {
  const message = ExportTraceServiceRequest.fromObject(exportOf(template, spans, marker, endMs));
  const bytes = Buffer.from(ExportTraceServiceRequest.encode(message).finish());
  const parts: Buffer[] = [];
  let from = 0;
  for (let at = bytes.indexOf(marker); at >= 0; at = bytes.indexOf(marker, from)) {
    parts.push(bytes.subarray(from, at));
    from = at + marker.length;
  }
  parts.push(bytes.subarray(from));
  if (parts.length !== spans + 1) throw new Error(`otlp body: ${parts.length - 1} markers`);
  return parts;
}

/**
 * Writes `<name>.otlp-parts` (`templates` exports of `spans` spans, their spans ending now) and
 * `<name>.keys` into `dir`.
 */
export function writeOtlpFiles(
  dir: string,
  name: string,
  keys: string[],
  opts: { templates: number; spans: number; now?: () => number },
): LoadFiles & { bodyBytes: number } {
  const marker = randomBytes(8);
  const endMs = (opts.now ?? Date.now)();
  // The salt of this file's ids (a phase's own), then the templates.
  const chunks: Buffer[] = [randomBytes(4), Buffer.from("\n")];
  let bodyBytes = 0;
  for (let t = 0; t < opts.templates; t++) {
    const parts = otlpTemplateParts(t, opts.spans, marker, endMs);
    bodyBytes = parts.reduce((a, p) => a + p.length, 0) + marker.length * (parts.length - 1);
    chunks.push(Buffer.from(`${parts.length}\n`));
    for (const p of parts) chunks.push(Buffer.from(`${p.length}\n`), p);
  }
  const files = {
    bodiesFile: join(dir, `${name}${OTLP_BODIES_SUFFIX}`),
    keysFile: join(dir, `${name}.keys`),
  };
  writeFileSync(files.bodiesFile, Buffer.concat(chunks));
  writeFileSync(files.keysFile, `${keys.join("\n")}\n`);
  return { ...files, bodyBytes };
}
