import { promisify } from "node:util";
import { gunzip } from "node:zlib";
import { HttpError } from "../http/errors.js";
import { ExportTraceServiceRequest, type TraceRequest } from "./otlp-schema.js";

// An OTLP/HTTP trace export's body → the request message, by protobufjs over OpenTelemetry's own
// definitions (otlp-schema.ts): binary protobuf as it is, JSON through the OTLP JSON mapping
// (lowerCamelCase names, enums as integers, 64-bit integers as strings or numbers, and trace and
// span ids as hex, not the base64 of protobuf's own JSON). A body that is no export is a 400.

export type OtlpEncoding = "protobuf" | "json";

const gunzipAsync = promisify(gunzip);

/**
 * Undoes the Content-Encoding (none, identity or gzip) of a body, its decoded size bounded by
 * `limit` as the sent body's is: a zip bomb is a 413, not memory.
 */
export async function decodeContent(
  body: Buffer,
  contentEncoding: string | undefined,
  limit: number,
): Promise<Buffer> {
  const coding = (contentEncoding ?? "").trim().toLowerCase();
  if (coding === "" || coding === "identity") return body;
  if (coding !== "gzip" && coding !== "x-gzip")
    throw new HttpError("unsupported_media_type", "send Content-Encoding: gzip, or none");
  try {
    return await gunzipAsync(body, { maxOutputLength: limit });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE")
      throw new HttpError("payload_too_large", `the body is over ${limit} bytes once unzipped`);
    throw new HttpError("invalid_report", "the body is not valid gzip");
  }
}

const notAnExport = (why: string) =>
  new HttpError("invalid_report", `the body is not an OTLP ExportTraceServiceRequest: ${why}`);

/** The decoded body → the export; a 400 (`invalid_report`, or `invalid_json`) when it is none. */
export function decodeTraces(body: Buffer, encoding: OtlpEncoding): TraceRequest {
  if (encoding === "protobuf") {
    try {
      return ExportTraceServiceRequest.decode(body) as TraceRequest;
    } catch (err) {
      // protobufjs throws on truncated or malformed input and on nesting past its limit (100).
      throw notAnExport((err as Error).message.slice(0, 200));
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpError("invalid_json", `the body is not valid JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw notAnExport("expected a JSON object");
  hexIdsToBytes(value);
  try {
    return ExportTraceServiceRequest.fromObject(value as Record<string, unknown>) as TraceRequest;
  } catch (err) {
    throw notAnExport((err as Error).message.slice(0, 200));
  }
}

const HEX = /^(?:[0-9a-fA-F]{2})*$/;
const ID_FIELDS = ["traceId", "spanId", "parentSpanId"] as const;

/** OTLP JSON writes ids as hex; protobufjs's fromObject reads a string as base64. */
function hexIdsToBytes(request: object): void {
  for (const rs of arrayAt(request, "resourceSpans"))
    for (const ss of arrayAt(rs, "scopeSpans"))
      for (const span of arrayAt(ss, "spans")) {
        idsToBytes(span);
        for (const link of arrayAt(span, "links")) idsToBytes(link);
      }
}

function idsToBytes(holder: unknown): void {
  if (holder === null || typeof holder !== "object") return;
  const h = holder as Record<string, unknown>;
  for (const field of ID_FIELDS) {
    const v = h[field];
    if (typeof v !== "string") continue;
    if (!HEX.test(v)) throw notAnExport(`${field} is not hex`);
    h[field] = Buffer.from(v, "hex");
  }
}

function arrayAt(holder: unknown, key: string): unknown[] {
  if (holder === null || typeof holder !== "object") return [];
  const v = (holder as Record<string, unknown>)[key];
  return Array.isArray(v) ? v : [];
}
