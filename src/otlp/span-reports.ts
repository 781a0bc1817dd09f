import { createHash } from "node:crypto";
import { isRateLimitHeader } from "../providers/keep-headers.js";
import { MAX_USAGE_TOKENS } from "../report/report-schema.js";
import {
  type AnyValue,
  type KeyValue,
  type ResourceSpans,
  SPAN_KIND_CLIENT,
  type Span,
  type TraceRequest,
} from "./otlp-schema.js";
import { providerOfGenAi, providerOfHost } from "./provider-names.js";

// An OTLP trace export → the reports its spans make. A span is a report when it is a call to a
// provider:
//
// - an HTTP client span to a provider's host (`server.address`, else the host of `url.full`), or
//   under a GenAI span of the same export (any host: a gateway, a custom Azure domain). Its
//   `http.response.header.<name>` attributes are the report's `headers` (the edge's allowlist and
//   bounds then apply, as to any report's), a 429's JSON error body its `error` where the span
//   carries one (an `exception` event's message, or `http.response.body`);
// - a GenAI span (`gen_ai.provider.name`, or the older `gen_ai.system`) with no such HTTP span
//   under it: a report without figures (a hint: provider, model and app).
//
// A GenAI span gives the HTTP spans under it (up to MAX_HOPS levels down) its provider (when the
// host names none), model (`gen_ai.response.model`, else `gen_ai.request.model`) and is then no
// report of its own: one call, one report. Its token counts (`gen_ai.usage.*`) are the report's
// `usage`. The app is the resource's `service.name` (`unknown`
// without one, or with the SDK's `unknown_service:…` default); the timestamp the span's end.
// Each report's id comes from its span's trace and span ids (spanReportId), so an exporter that
// sends the same export again stores nothing twice. Every other span is only counted.

export interface SpanReport {
  /** A report body as POST /api/reports takes an item (id included), for validateItem. */
  body: Record<string, unknown>;
}

export interface SpanReports {
  reports: SpanReport[];
  /** Spans that are no provider call. */
  ignored: number;
  /** GenAI spans whose call is reported by the HTTP span under them. */
  merged: number;
  /** Provider calls that make no report, and why (a span without valid ids). */
  rejected: { count: number; message: string | null };
}

/** How many parents up an HTTP span's GenAI span may be (the SDK's own spans between). */
const MAX_HOPS = 4;
const HEADER_PREFIX = "http.response.header.";
/** The longest text searched for a JSON error body: the stored one is at most 16,384 characters. */
const MAX_ERROR_TEXT = 65_536;

/** What a span says that the mapping reads; one pass over its attributes. */
interface Seen {
  span: Span;
  resource: Resource;
  genAiProvider: string | null;
  model: string | null;
  requestModel: string | null;
  httpMethod: boolean;
  host: string | null;
  url: string | null;
  status: number | null;
  headers: [string, string][] | null;
  body: string | null;
  usage: Usage;
}

/** A report's `usage`: a count is a whole number from 0 to MAX_USAGE_TOKENS, or null. */
interface Usage {
  input_tokens: number | null;
  output_tokens: number | null;
  cached_tokens: number | null;
}

/**
 * The attributes of each usage field, first wins: the GenAI conventions' names, then the older
 * ones instrumentations still emit (`prompt_tokens` / `completion_tokens`, OpenLLMetry's
 * `cache_read_input_tokens`).
 */
const USAGE_ATTRIBUTES: Record<string, [keyof Usage, number]> = {
  "gen_ai.usage.input_tokens": ["input_tokens", 0],
  "gen_ai.usage.prompt_tokens": ["input_tokens", 1],
  "gen_ai.usage.output_tokens": ["output_tokens", 0],
  "gen_ai.usage.completion_tokens": ["output_tokens", 1],
  "gen_ai.usage.cache_read.input_tokens": ["cached_tokens", 0],
  "gen_ai.usage.cache_read_input_tokens": ["cached_tokens", 1],
};

interface Resource {
  app: string;
}

const idHex = (b: Uint8Array | undefined) =>
  b && b.length > 0 ? Buffer.from(b.buffer, b.byteOffset, b.length).toString("hex") : "";

export function spanReports(request: TraceRequest): SpanReports {
  const out: SpanReports = {
    reports: [],
    ignored: 0,
    merged: 0,
    rejected: { count: 0, message: null },
  };
  const genAi: Seen[] = [];
  const http: Seen[] = [];
  const all: { span: Span; resource: Resource }[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = resourceOf(rs);
    for (const ss of rs.scopeSpans ?? []) {
      for (const span of ss.spans ?? []) {
        all.push({ span, resource });
        const seen = read(span, resource);
        if (seen.genAiProvider !== null) genAi.push(seen);
        else if (seen.httpMethod && (span.kind === SPAN_KIND_CLIENT || span.kind === 0))
          http.push(seen);
      }
    }
  }

  // The GenAI spans by trace and span id, and every span's parent, when there is a GenAI span.
  const genAiByKey = new Map<string, Seen>();
  const parentOf = new Map<string, string>();
  if (genAi.length > 0) {
    for (const g of genAi) genAiByKey.set(idHex(g.span.traceId) + idHex(g.span.spanId), g);
    for (const { span } of all) {
      const parent = idHex(span.parentSpanId);
      if (parent !== "") {
        const trace = idHex(span.traceId);
        parentOf.set(trace + idHex(span.spanId), trace + parent);
      }
    }
  }
  const callOf = (s: Seen): Seen | null => {
    let key = idHex(s.span.traceId) + idHex(s.span.spanId);
    for (let hop = 0; hop < MAX_HOPS; hop++) {
      const parent = parentOf.get(key);
      if (parent === undefined) return null;
      const g = genAiByKey.get(parent);
      if (g) return g;
      key = parent;
    }
    return null;
  };

  const reported = new Set<Seen>();
  let providerCalls = 0;
  for (const h of http) {
    const call = genAi.length > 0 ? callOf(h) : null;
    const hostProvider = h.host === null ? null : providerOfHost(h.host);
    if (hostProvider === null && call === null) continue;
    providerCalls++;
    if (call) reported.add(call);
    const provider = hostProvider ?? (call?.genAiProvider as string);
    const model = call ? (call.model ?? call.requestModel) : (h.model ?? h.requestModel);
    add(out, h, provider, model, call?.usage ?? h.usage);
  }
  for (const g of genAi) {
    providerCalls++;
    if (reported.has(g)) {
      out.merged++;
      continue;
    }
    add(out, g, g.genAiProvider as string, g.model ?? g.requestModel, g.usage);
  }
  out.ignored = all.length - providerCalls;
  return out;
}

function add(
  out: SpanReports,
  s: Seen,
  provider: string,
  model: string | null,
  usage: Usage,
): void {
  const id = spanReportId(s.span);
  if (id === null) {
    out.rejected.count++;
    out.rejected.message ??= "a provider call's span without a valid trace id and span id";
    return;
  }
  const body: Record<string, unknown> = {
    id,
    provider,
    app: s.resource.app,
    model,
    limits: {},
  };
  const ms = nanosToMs(s.span.endTimeUnixNano);
  if (ms !== null) body.timestamp = new Date(ms).toISOString();
  if (s.headers) body.headers = s.headers;
  if (usage.input_tokens !== null || usage.output_tokens !== null || usage.cached_tokens !== null)
    body.usage = usage;
  if (s.status === 429) {
    const error = errorBody(s);
    if (error !== undefined) body.error = error;
  }
  out.reports.push({ body });
}

function resourceOf(rs: ResourceSpans): Resource {
  let app = "unknown";
  for (const kv of rs.resource?.attributes ?? []) {
    if (kv.key !== "service.name") continue;
    const name = stringOf(kv.value)?.trim();
    // The SDKs' default when none is set ("unknown_service:node") names no app.
    if (name && !name.startsWith("unknown_service")) app = name;
  }
  return { app };
}

function read(span: Span, resource: Resource): Seen {
  const seen: Seen = {
    span,
    resource,
    genAiProvider: null,
    model: null,
    requestModel: null,
    httpMethod: false,
    host: null,
    url: null,
    status: null,
    headers: null,
    body: null,
    usage: { input_tokens: null, output_tokens: null, cached_tokens: null },
  };
  // The rank each usage field was taken from (0 the conventions' name): a newer name wins.
  const usageRank: Partial<Record<keyof Usage, number>> = {};
  let system: string | null = null;
  let peer: string | null = null;
  for (const kv of span.attributes ?? []) {
    const key = kv.key;
    if (key === undefined) continue;
    // Most spans' attributes are none of these: one switch, and one prefix check.
    switch (key) {
      case "gen_ai.provider.name":
        seen.genAiProvider = nonEmpty(stringOf(kv.value));
        break;
      case "gen_ai.system":
        system = nonEmpty(stringOf(kv.value));
        break;
      case "gen_ai.response.model":
        seen.model = nonEmpty(stringOf(kv.value));
        break;
      case "gen_ai.request.model":
        seen.requestModel = nonEmpty(stringOf(kv.value));
        break;
      case "http.request.method":
      case "http.method":
        seen.httpMethod = true;
        break;
      case "server.address":
        seen.host = nonEmpty(stringOf(kv.value));
        break;
      case "net.peer.name":
        peer = nonEmpty(stringOf(kv.value));
        break;
      case "url.full":
      case "http.url":
        seen.url = stringOf(kv.value);
        break;
      case "http.response.status_code":
      case "http.status_code":
        seen.status = numberOf(kv.value);
        break;
      case "http.response.body":
        seen.body = stringOf(kv.value);
        break;
      default:
        if (key.startsWith(HEADER_PREFIX)) addHeader(seen, key.slice(HEADER_PREFIX.length), kv);
        else if (key.startsWith("gen_ai.usage.")) addUsage(seen, usageRank, key, kv);
    }
  }
  if (seen.genAiProvider === null && system !== null) seen.genAiProvider = system;
  if (seen.genAiProvider !== null) seen.genAiProvider = providerOfGenAi(seen.genAiProvider);
  seen.host ??= peer ?? hostOfUrl(seen.url);
  return seen;
}

/** One `gen_ai.usage.*` attribute into the span's usage, unless a newer name gave the field. */
function addUsage(
  seen: Seen,
  rankOf: Partial<Record<keyof Usage, number>>,
  key: string,
  kv: KeyValue,
): void {
  if (!Object.hasOwn(USAGE_ATTRIBUTES, key)) return;
  const [field, rank] = USAGE_ATTRIBUTES[key] as [keyof Usage, number];
  const n = tokenCount(kv.value);
  if (n === null || rank >= (rankOf[field] ?? Number.POSITIVE_INFINITY)) return;
  seen.usage[field] = n;
  rankOf[field] = rank;
}

/**
 * One `http.response.header.<name>` attribute → [name, value] pairs: the instrumentations record
 * a header as an array of strings (one per field line), some as one string. Only allowlisted names
 * are taken here; the bounds are readProviderSaid's, as for any report.
 */
function addHeader(seen: Seen, name: string, kv: KeyValue): void {
  if (!isRateLimitHeader(name)) return;
  const v = kv.value;
  if (!v) return;
  seen.headers ??= [];
  const pairs = seen.headers;
  if (Object.hasOwn(v, "arrayValue")) {
    for (const item of v.arrayValue?.values ?? []) {
      const text = scalarText(item);
      if (text !== null) pairs.push([name, text]);
    }
    return;
  }
  const text = scalarText(v);
  if (text !== null) pairs.push([name, text]);
}

/** A 429's JSON error body, from an exception event's message or `http.response.body`. */
function errorBody(s: Seen): unknown {
  const texts: string[] = [];
  if (s.body !== null) texts.push(s.body);
  for (const event of s.span.events ?? []) {
    if (event.name !== "exception") continue;
    for (const kv of event.attributes ?? [])
      if (kv.key === "exception.message") {
        const text = stringOf(kv.value);
        if (text !== null) texts.push(text);
      }
  }
  for (const text of texts) {
    const json = jsonIn(text);
    if (json !== undefined) return json;
  }
  return undefined;
}

/** The JSON object or array a text is, or holds after a prefix ("429 {…}"); undefined if none. */
function jsonIn(text: string): unknown {
  if (text.length > MAX_ERROR_TEXT) return undefined;
  const start = text.search(/[[{]/);
  if (start < 0) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(start));
    return value !== null && typeof value === "object" ? value : undefined;
  } catch {
    return undefined;
  }
}

function stringOf(v: AnyValue | undefined): string | null {
  return v && Object.hasOwn(v, "stringValue") && typeof v.stringValue === "string"
    ? v.stringValue
    : null;
}

const nonEmpty = (s: string | null) => (s === null || s.trim() === "" ? null : s);

/** A string, integer, double or bool as header text; null for anything else. */
function scalarText(v: AnyValue): string | null {
  if (Object.hasOwn(v, "stringValue") && typeof v.stringValue === "string") return v.stringValue;
  if (Object.hasOwn(v, "intValue") && v.intValue != null) return String(v.intValue);
  if (Object.hasOwn(v, "doubleValue") && typeof v.doubleValue === "number")
    return String(v.doubleValue);
  return null;
}

function numberOf(v: AnyValue | undefined): number | null {
  if (!v) return null;
  const text = scalarText(v);
  if (text === null) return null;
  const n = Number(text);
  return Number.isInteger(n) ? n : null;
}

/**
 * A token count: an int or double attribute, rounded like the report API's `usage`; null for
 * anything else or outside 0..MAX_USAGE_TOKENS (dropped, as no call uses that many).
 */
function tokenCount(v: AnyValue | undefined): number | null {
  if (!v) return null;
  let n: number;
  if (Object.hasOwn(v, "intValue") && v.intValue != null) n = Number(String(v.intValue));
  else if (Object.hasOwn(v, "doubleValue") && typeof v.doubleValue === "number") n = v.doubleValue;
  else return null;
  if (!Number.isFinite(n)) return null;
  n = Math.round(n);
  return n >= 0 && n <= MAX_USAGE_TOKENS ? n : null;
}

function hostOfUrl(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).hostname || null;
  } catch {
    return null;
  }
}

/** The largest ms a Date holds. */
const MAX_DATE_MS = 8.64e15;

/** A fixed64 of Unix nanoseconds (a Long, number or decimal string) → ms; null when zero or junk. */
export function nanosToMs(nanos: unknown): number | null {
  if (nanos == null) return null;
  let n: bigint;
  try {
    n = BigInt(String(nanos));
  } catch {
    return null;
  }
  const ms = Number(n / 1_000_000n);
  return ms > 0 && ms <= MAX_DATE_MS ? ms : null;
}

/**
 * A span's report id: a UUID made from its trace and span ids alone, the same for every send of
 * the span, so that the edge's client-id claims (report-ids.ts) store it once. UUIDv7's layout
 * (the span's end in ms, then 74 bits of SHA-256 of the two ids), so that these ids sort by time
 * like the edge's own. Null for a span whose ids are not 16 and 8 bytes, none of them zero.
 */
export function spanReportId(span: Span): string | null {
  const trace = span.traceId;
  const id = span.spanId;
  if (!trace || !id || trace.length !== 16 || id.length !== 8) return null;
  if (trace.every((b) => b === 0) || id.every((b) => b === 0)) return null;
  const hash = createHash("sha256").update(trace).update(id).digest();
  const ms = Math.min(nanosToMs(span.endTimeUnixNano) ?? 0, 2 ** 48 - 1);
  const b = Buffer.alloc(16);
  b.writeUIntBE(ms, 0, 6);
  hash.copy(b, 6, 0, 10);
  b[6] = 0x70 | ((b[6] as number) & 0x0f);
  b[8] = 0x80 | ((b[8] as number) & 0x3f);
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
