import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { promisify } from "node:util";
import zlib from "node:zlib";
import { HttpQueryError } from "./http-errors.js";

// The request side of ClickHouse's HTTP interface: which URL parameters are settings and which
// are the protocol's own, credentials in their three accepted places, compressed and multipart
// bodies, and the response's content type and compression.

/** Parameters the HTTP handler itself consumes (or that only matter to a real server). */
const PROTOCOL_PARAMS = new Set([
  "query",
  "database",
  "default_format",
  "query_id",
  "user",
  "password",
  "quota_key",
  "session_id",
  "session_timeout",
  "session_check",
  "compress",
  "decompress",
  "buffer_size",
  "wait_end_of_query",
  "stacktrace",
  "role",
  "client_protocol_version",
  "enable_http_compression",
  "send_progress_in_http_headers",
  "add_http_cors_header",
  "cancel_http_readonly_queries_on_client_close",
]);

export interface QueryRequest {
  query: string | undefined;
  database: string;
  defaultFormat: string;
  queryId: string | undefined;
  params: Map<string, string>;
  settings: Map<string, string>;
  compressResponse: boolean;
}

export function parseQueryRequest(url: URL, req: IncomingMessage): QueryRequest {
  const params = new Map<string, string>();
  const settings = new Map<string, string>();
  for (const [key, value] of url.searchParams) {
    if (key.startsWith("param_")) params.set(key.slice(6), value);
    else if (!PROTOCOL_PARAMS.has(key) && !key.startsWith("http_")) settings.set(key, value);
  }
  const header = (name: string) => {
    const v = req.headers[name];
    return typeof v === "string" && v !== "" ? v : undefined;
  };
  return {
    query: url.searchParams.get("query") ?? undefined,
    database: url.searchParams.get("database") || header("x-clickhouse-database") || "default",
    defaultFormat:
      url.searchParams.get("default_format") || header("x-clickhouse-format") || "TabSeparated",
    queryId: url.searchParams.get("query_id") || undefined,
    params,
    settings,
    compressResponse: url.searchParams.get("enable_http_compression") === "1",
  };
}

export interface Credentials {
  user: string;
  password: string;
}

const invalid = (message: string) =>
  new HttpQueryError("AUTHENTICATION_FAILED", `Invalid authentication: ${message}`);

/** The caller's user and password; `default` with no password when none is given. */
export function readCredentials(url: URL, req: IncomingMessage): Credentials {
  const authorization = req.headers.authorization;
  const headerUser = req.headers["x-clickhouse-user"];
  const headerKey = req.headers["x-clickhouse-key"];
  const paramUser = url.searchParams.get("user");
  const paramPassword = url.searchParams.get("password");
  const byHeaders = headerUser !== undefined || headerKey !== undefined;
  const byParams = paramUser !== null || paramPassword !== null;
  if (authorization !== undefined) {
    if (byHeaders) {
      throw invalid(
        "it is not allowed to use X-ClickHouse HTTP headers and Authorization HTTP header simultaneously",
      );
    }
    if (byParams) {
      throw invalid(
        "it is not allowed to use Authorization HTTP header and authentication via parameters simultaneously",
      );
    }
    const [scheme = "", token = ""] = authorization.split(/\s+/, 2);
    if (scheme.toLowerCase() !== "basic") {
      throw invalid(`'${scheme}' HTTP Authorization scheme is not supported`);
    }
    const decoded = Buffer.from(token, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    return colon === -1
      ? { user: decoded, password: "" }
      : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  if (byHeaders && byParams) {
    throw invalid(
      "it is not allowed to use X-ClickHouse HTTP headers and authentication via parameters simultaneously",
    );
  }
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  if (byHeaders) return { user: first(headerUser) || "default", password: first(headerKey) ?? "" };
  return { user: paramUser || "default", password: paramPassword ?? "" };
}

function decoder(encoding: string): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | undefined {
  switch (encoding) {
    case "":
    case "identity":
      return undefined;
    case "gzip":
    case "x-gzip":
      return zlib.createGunzip();
    case "deflate":
      return zlib.createInflate();
    case "br":
      return zlib.createBrotliDecompress();
    default:
      throw new HttpQueryError("NOT_IMPLEMENTED", `Unknown compression method: '${encoding}'`);
  }
}

/** The whole request body, decompressed per Content-Encoding, up to `limit` bytes. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const encoding = String(req.headers["content-encoding"] ?? "")
    .trim()
    .toLowerCase();
  const inflate = decoder(encoding);
  const source: Readable = inflate ? req.pipe(inflate) : req;
  req.on("error", (err) => inflate?.destroy(err));
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source) {
      size += (chunk as Buffer).length;
      if (size > limit) {
        throw new HttpQueryError(
          "MEMORY_LIMIT_EXCEEDED",
          `Request body exceeds ${limit} bytes, the embedded server's limit`,
        );
      }
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof HttpQueryError || !inflate) throw err;
    throw new HttpQueryError(
      "CANNOT_DECOMPRESS",
      `Cannot decompress ${encoding} request body: ${(err as Error).message}`,
    );
  }
  return Buffer.concat(chunks, size);
}

/** `query` and `param_*` parts of a multipart/form-data body (clickhouse-js multipart params). */
export function parseMultipart(body: Buffer, contentType: string): Map<string, string> {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary)
    throw new HttpQueryError("CANNOT_PARSE_TEXT", "multipart/form-data without a boundary");
  const parts = new Map<string, string>();
  for (const raw of body.toString("utf8").split(`--${boundary}`).slice(1)) {
    if (raw.startsWith("--")) break;
    const headerEnd = raw.indexOf("\r\n\r\n");
    if (headerEnd === -1) continue;
    const headers = raw.slice(0, headerEnd);
    const name = /name="([^"]*)"/i.exec(headers)?.[1];
    if (name === undefined) continue;
    if (/filename=/i.test(headers) || !(name === "query" || name.startsWith("param_"))) {
      throw new HttpQueryError(
        "NOT_IMPLEMENTED",
        `External data ('${name}') is not supported by the embedded ClickHouse server`,
      );
    }
    parts.set(name, raw.slice(headerEnd + 4).replace(/\r\n$/, ""));
  }
  return parts;
}

/** Content-Type clickhouse-server sends for an output format. */
export function contentTypeFor(format: string, settings: Map<string, string>): string {
  const f = format.toLowerCase();
  if (f === "tskv") return "text/plain; charset=UTF-8";
  if (f.startsWith("tabseparated") || f.startsWith("tsv")) {
    return "text/tab-separated-values; charset=UTF-8";
  }
  if (f === "csv") return "text/csv; charset=UTF-8; header=absent";
  if (f.startsWith("csvwith")) return "text/csv; charset=UTF-8; header=present";
  if (["jsoneachrow", "jsonstringseachrow", "jsonlines", "ndjson"].includes(f)) {
    return settings.get("output_format_json_array_of_rows") === "1"
      ? "application/json; charset=UTF-8"
      : "application/x-ndjson; charset=UTF-8";
  }
  if (["json", "jsoncompact", "jsonstrings", "jsoncompactstrings"].includes(f)) {
    return "application/json; charset=UTF-8";
  }
  if (f === "xml") return "application/xml; charset=UTF-8";
  if (
    /^(native|rowbinary|parquet|arrow|orc|avro|protobuf|msgpack|capnproto|bsoneachrow|npy|rawblob)/.test(
      f,
    )
  ) {
    return "application/octet-stream";
  }
  return "text/plain; charset=UTF-8";
}

const COMPRESSORS = {
  gzip: promisify(zlib.gzip),
  deflate: promisify(zlib.deflate),
  br: promisify(zlib.brotliCompress),
} as const;
export type ResponseEncoding = keyof typeof COMPRESSORS;

/** The first encoding the client accepts that this server can produce. */
export function pickEncoding(acceptEncoding: string | undefined): ResponseEncoding | undefined {
  for (const item of (acceptEncoding ?? "").split(",")) {
    const name = item.split(";")[0]?.trim().toLowerCase();
    if (name === "gzip" || name === "deflate" || name === "br") return name;
  }
  return undefined;
}

export function compress(body: Uint8Array, encoding: ResponseEncoding): Promise<Buffer> {
  return COMPRESSORS[encoding](body);
}
