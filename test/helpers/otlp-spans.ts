import { randomBytes } from "node:crypto";
import { decodeTraces } from "../../src/otlp/decode-traces.js";
import { ExportTraceServiceRequest } from "../../src/otlp/otlp-schema.js";

// OTLP trace exports written by hand, in the OTLP JSON mapping (hex ids, lowerCamelCase, enums as
// integers, 64-bit integers as strings), and their binary protobuf form, for tests that need
// spans no SDK would make (the real SDK's exports are in the integration tests).

export type AttrValue = string | number | boolean | string[];

export interface SpanInput {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  /** SpanKind: 3 is CLIENT. */
  kind?: number;
  name?: string;
  /** End time, Unix ms. */
  endMs?: number;
  attributes?: Record<string, AttrValue>;
  events?: { name: string; attributes: Record<string, AttrValue> }[];
}

export const hexId = (bytes: number) => randomBytes(bytes).toString("hex");

function anyValue(v: AttrValue): Record<string, unknown> {
  if (Array.isArray(v)) return { arrayValue: { values: v.map((s) => ({ stringValue: s })) } };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
}

const attributesOf = (attrs: Record<string, AttrValue> = {}) =>
  Object.entries(attrs).map(([key, value]) => ({ key, value: anyValue(value) }));

/** A span in OTLP JSON; ids random unless given. */
export function otlpSpan(s: SpanInput): Record<string, unknown> {
  const end = BigInt(s.endMs ?? Date.now()) * 1_000_000n;
  return {
    traceId: s.traceId ?? hexId(16),
    spanId: s.spanId ?? hexId(8),
    ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
    name: s.name ?? "span",
    kind: s.kind ?? 1,
    startTimeUnixNano: String(end - 5_000_000n),
    endTimeUnixNano: String(end),
    attributes: attributesOf(s.attributes),
    events: (s.events ?? []).map((e) => ({
      name: e.name,
      timeUnixNano: String(end),
      attributes: attributesOf(e.attributes),
    })),
  };
}

/** An export of resources, each with its `service.name` (none when null) and spans. */
export function otlpExport(
  resources: { service: string | null; spans: Record<string, unknown>[] }[],
): Record<string, unknown> {
  return {
    resourceSpans: resources.map((r) => ({
      resource: {
        attributes: r.service === null ? [] : attributesOf({ "service.name": r.service }),
      },
      scopeSpans: [{ scope: { name: "test" }, spans: r.spans }],
    })),
  };
}

export const otlpJson = (request: Record<string, unknown>): Buffer =>
  Buffer.from(JSON.stringify(request));

/** The same export as binary protobuf. */
export function otlpProtobuf(request: Record<string, unknown>): Buffer {
  const message = decodeTraces(otlpJson(request), "json");
  return Buffer.from(ExportTraceServiceRequest.encode(message as never).finish());
}

/** An HTTP client span to `host`, its response headers recorded as the undici instrumentation does. */
export function httpSpan(
  host: string,
  headers: Record<string, string>,
  more: Partial<SpanInput> & { status?: number } = {},
): Record<string, unknown> {
  const attributes: Record<string, AttrValue> = {
    "http.request.method": "POST",
    "server.address": host,
    "server.port": 443,
    "url.full": `https://${host}/v1/chat/completions`,
    "http.response.status_code": more.status ?? 200,
    ...more.attributes,
  };
  for (const [name, value] of Object.entries(headers))
    attributes[`http.response.header.${name}`] = [value];
  return otlpSpan({ kind: 3, name: "POST", ...more, attributes });
}
