import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clientReport,
  type EdgeFixture,
  startEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { rawRequest } from "../helpers/raw-http.js";

// Hand-written nasty requests as raw bytes over TCP to a real listener: media types and
// charsets, chunked bodies over the limit, bodies that lie about their length, odd
// Authorization headers, invalid UTF-8, NUL bytes, broken HTTP. Each gets the contract's status
// and body — never a 5xx, never silence — nothing refused is queued, and the server keeps
// serving the next client.

let fx: EdgeFixture;
let k: TestKey;
let port: number;

const REQUEST_MS = 1_000;

beforeAll(async () => {
  fx = await startEdge({
    env: { REQUEST_TIMEOUT_MS: String(REQUEST_MS), HEADERS_TIMEOUT_MS: "500" },
  });
  k = await fx.createKey();
  await fx.edge.app.listen({ host: "127.0.0.1", port: 0 });
  port = (fx.edge.app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await fx?.close();
});

const BODY = JSON.stringify(clientReport());
const CRLF = "\r\n";

interface Case {
  name: string;
  /** The request; KEY is replaced by a valid key, BODY by a valid report. */
  send: string | Buffer | (() => string | Buffer);
  status: number;
  error?: string;
  halfClose?: boolean;
  /** Answered by Node before the app sees the request: the status, with no body. */
  bare?: true;
}

/** A POST to /api/report with these header lines and body (Content-Length added unless given). */
function req(headers: string[], body: string | Buffer = BODY, contentLength = true): Buffer {
  const b = typeof body === "string" ? Buffer.from(body) : body;
  const lines = ["POST /api/report HTTP/1.1", "Host: edge", ...headers];
  if (contentLength) lines.push(`Content-Length: ${b.length}`);
  return Buffer.concat([Buffer.from(lines.join(CRLF) + CRLF + CRLF, "latin1"), b]);
}
const auth = "Authorization: Bearer KEY";
const json = "Content-Type: application/json";
const chunked = (chunks: string[]) =>
  chunks.map((c) => `${Buffer.byteLength(c).toString(16)}${CRLF}${c}${CRLF}`).join("") +
  `0${CRLF}${CRLF}`;

const CASES: Case[] = [
  // Media types and charsets.
  { name: "plain valid request", send: req([auth, json]), status: 200 },
  { name: "no content type", send: req([auth]), status: 415, error: "unsupported_media_type" },
  { name: "text/plain", send: req([auth, "Content-Type: text/plain"]), status: 415 },
  { name: "empty content type", send: req([auth, "Content-Type: "]), status: 415 },
  { name: "utf-8 charset", send: req([auth, `${json}; charset=utf-8`]), status: 200 },
  { name: "UTF8 charset, no space", send: req([auth, `${json};charset=UTF8`]), status: 200 },
  { name: "quoted charset", send: req([auth, `${json}; charset="utf-8"`]), status: 200 },
  {
    name: "upper-case media type",
    send: req([auth, "Content-Type: APPLICATION/JSON"]),
    status: 200,
  },
  { name: "latin1 charset", send: req([auth, `${json}; charset=latin1`]), status: 415 },
  { name: "utf-16 charset", send: req([auth, `${json}; charset=utf-16`]), status: 415 },
  { name: "json suffix type", send: req([auth, "Content-Type: application/jsonx"]), status: 415 },
  {
    name: "json-patch",
    send: req([auth, "Content-Type: application/json-patch+json"]),
    status: 415,
  },
  {
    name: "form",
    send: req([auth, "Content-Type: application/x-www-form-urlencoded"]),
    status: 415,
  },
  {
    name: "multipart",
    send: req([auth, "Content-Type: multipart/form-data; boundary=x"]),
    status: 415,
  },
  {
    name: "type list",
    send: req([auth, "Content-Type: text/plain, application/json"]),
    status: 415,
  },

  // Chunked bodies.
  {
    name: "chunked, valid",
    send: req(
      [auth, json, "Transfer-Encoding: chunked"],
      chunked([BODY.slice(0, 50), BODY.slice(50)]),
      false,
    ),
    status: 200,
  },
  {
    name: "chunked, over the limit",
    send: req(
      [auth, json, "Transfer-Encoding: chunked"],
      chunked(Array.from({ length: 40 }, () => "x".repeat(1024))),
      false,
    ),
    status: 413,
    error: "payload_too_large",
  },
  {
    name: "chunked, bad chunk size",
    send: req(
      [auth, json, "Transfer-Encoding: chunked"],
      `zz${CRLF}{}${CRLF}0${CRLF}${CRLF}`,
      false,
    ),
    status: 400,
  },
  {
    name: "chunked and Content-Length together",
    send: req(
      [auth, json, "Transfer-Encoding: chunked", "Content-Length: 5"],
      chunked([BODY]),
      false,
    ),
    status: 400,
  },

  // Bodies that lie about their length.
  {
    name: "Content-Length over the limit",
    send: req([auth, json, "Content-Length: 99999999999"], "", false),
    status: 413,
  },
  {
    name: "body longer than Content-Length",
    send: req([auth, json, "Content-Length: 10"], BODY, false),
    status: 400,
    error: "invalid_json",
  },
  {
    name: "body shorter than Content-Length, then silence",
    send: req([auth, json, `Content-Length: ${BODY.length + 10}`], BODY, false),
    status: 408,
    error: "request_timeout",
  },
  {
    name: "body shorter than Content-Length, then FIN",
    send: req([auth, json, `Content-Length: ${BODY.length + 10}`], BODY, false),
    halfClose: true,
    status: 400,
  },
  {
    name: "negative Content-Length",
    send: req([auth, json, "Content-Length: -1"], BODY, false),
    status: 400,
  },
  {
    name: "non-numeric Content-Length",
    send: req([auth, json, "Content-Length: abc"], BODY, false),
    status: 400,
  },
  {
    name: "two different Content-Lengths",
    send: req([auth, json, `Content-Length: ${BODY.length}`, "Content-Length: 3"], BODY, false),
    status: 400,
  },
  { name: "empty body", send: req([auth, json], ""), status: 400, error: "invalid_json" },

  // Authorization variants.
  { name: "lower-case bearer", send: req(["Authorization: bearer KEY", json]), status: 200 },
  { name: "upper-case BEARER", send: req(["Authorization: BEARER KEY", json]), status: 200 },
  { name: "extra spaces", send: req(["Authorization:    Bearer     KEY    ", json]), status: 200 },
  { name: "tabs", send: req(["Authorization:\tBearer\tKEY\t", json]), status: 200 },
  { name: "header name in capitals", send: req(["AUTHORIZATION: Bearer KEY", json]), status: 200 },
  {
    name: "Bearer without key",
    send: req(["Authorization: Bearer", json]),
    status: 401,
    error: "missing_project_key",
  },
  {
    name: "Bearer and spaces",
    send: req(["Authorization: Bearer    ", json]),
    status: 401,
    error: "missing_project_key",
  },
  {
    name: "empty Authorization",
    send: req(["Authorization: ", json]),
    status: 401,
    error: "missing_project_key",
  },
  {
    name: "Basic scheme",
    send: req(["Authorization: Basic a2V5OnNlY3JldA==", json]),
    status: 401,
    error: "missing_project_key",
  },
  {
    name: "key and junk",
    send: req(["Authorization: Bearer KEY junk", json]),
    status: 401,
    error: "invalid_project_key",
  },
  {
    name: "key with a comma",
    send: req(["Authorization: Bearer KEY,KEY", json]),
    status: 401,
    error: "invalid_project_key",
  },
  // Node keeps the first of two Authorization headers and drops the second: the edge refuses both.
  {
    name: "two headers, valid first",
    send: req([auth, "Authorization: Bearer hr_nope", json]),
    status: 400,
    error: "invalid_request",
  },
  {
    name: "two headers, valid second",
    send: req(["Authorization: Bearer hr_nope", auth, json]),
    status: 400,
    error: "invalid_request",
  },
  {
    name: "latin-1 byte in key",
    send: () => req([`Authorization: Bearer ${k.key.slice(0, -1)}\xe9`, json]),
    status: 401,
    error: "invalid_project_key",
  },
  {
    name: "UTF-8 bytes in key",
    send: () =>
      Buffer.concat([
        Buffer.from(`POST /api/report HTTP/1.1${CRLF}Host: edge${CRLF}Authorization: Bearer `),
        Buffer.from("hr_ключ", "utf8"),
        Buffer.from(`${CRLF}${json}${CRLF}Content-Length: ${BODY.length}${CRLF}${CRLF}${BODY}`),
      ]),
    status: 401,
    error: "invalid_project_key",
  },
  { name: "NUL in Authorization", send: req(["Authorization: Bearer KEY\x00", json]), status: 400 },
  {
    name: "CR in Authorization",
    send: req(["Authorization: Bearer KEY\rX: y", json]),
    status: 400,
  },
  {
    name: "20 KB Authorization",
    send: req([`Authorization: Bearer ${"k".repeat(20_000)}`, json]),
    status: 431,
    error: "headers_too_large",
  },

  // Invalid UTF-8 and NUL bytes in the body.
  {
    name: "invalid UTF-8 in a string",
    send: req(
      [auth, json],
      Buffer.concat([
        Buffer.from('{"provider":"op'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('ai","limits":{}}'),
      ]),
    ),
    status: 400,
    error: "invalid_report",
  },
  {
    name: "overlong UTF-8 encoding",
    send: req(
      [auth, json],
      Buffer.concat([
        Buffer.from('{"provider":"'),
        Buffer.from([0xc0, 0xaf]),
        Buffer.from('","limits":{}}'),
      ]),
    ),
    status: 400,
    error: "invalid_report",
  },
  {
    name: "UTF-16 surrogate encoded as UTF-8 (CESU)",
    send: req(
      [auth, json],
      Buffer.concat([
        Buffer.from('{"provider":"'),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from('","limits":{}}'),
      ]),
    ),
    status: 400,
    error: "invalid_report",
  },
  {
    name: "invalid UTF-8 outside strings",
    send: req(
      [auth, json],
      Buffer.concat([Buffer.from('{"provider":"openai","limits":{}}'), Buffer.from([0xff])]),
    ),
    status: 400,
    error: "invalid_json",
  },
  {
    name: "raw NUL inside a string",
    send: req([auth, json], '{"provider":"a\x00b","limits":{}}'),
    status: 400,
    error: "invalid_json",
  },
  {
    name: "NUL after the JSON",
    send: req([auth, json], '{"provider":"a","limits":{}}\x00'),
    status: 400,
    error: "invalid_json",
  },
  {
    name: "escaped NUL inside a string",
    send: req([auth, json], '{"provider":"a\\u0000b","limits":{}}'),
    status: 200,
  },
  {
    name: "BOM before the JSON",
    send: req([auth, json], Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(BODY)])),
    status: 400,
    error: "invalid_json",
  },
  {
    name: "NUL in the path",
    send: "POST /api/rep\x00ort HTTP/1.1\r\nHost: edge\r\n\r\n",
    status: 400,
  },
  { name: "NUL in a header name", send: req([auth, json, "X-\x00: 1"]), status: 400 },

  // Broken or unusual HTTP.
  { name: "garbage request line", send: `GARBAGE${CRLF}${CRLF}`, status: 400 },
  {
    name: "HTTP/1.1 without Host",
    send: `POST /api/report HTTP/1.1${CRLF}${CRLF}`,
    status: 400,
    bare: true,
  },
  {
    name: "unknown method",
    send: req([auth, json]).toString("latin1").replace("POST", "BREW"),
    status: 400,
  },
  {
    name: "PROPFIND",
    send: req([auth, json]).toString("latin1").replace("POST", "PROPFIND"),
    status: 404,
  },
  {
    name: "GET",
    send: `GET /api/report HTTP/1.1${CRLF}Host: edge${CRLF}${CRLF}`,
    status: 405,
    error: "method_not_allowed",
  },
  {
    name: "query string ignored",
    send: req([auth, json]).toString("latin1").replace("/api/report", "/api/report?x=1&x=2"),
    status: 200,
  },
  {
    name: "dot segments",
    send: req([auth, json]).toString("latin1").replace("/api/report", "/api/../api/report"),
    status: 404,
  },
  // %72 is "r": an unreserved character, decoded before routing as RFC 3986 allows.
  {
    name: "encoded path",
    send: req([auth, json]).toString("latin1").replace("/api/report", "/api/%72eport"),
    status: 200,
  },
  { name: "HTTP/2 preface", send: `PRI * HTTP/2.0${CRLF}${CRLF}SM${CRLF}${CRLF}`, status: 400 },
  { name: "Expect: 100-continue", send: req([auth, json, "Expect: 100-continue"]), status: 200 },
  {
    name: "unsupported Expect",
    send: req([auth, json, "Expect: 200-ok"]),
    status: 417,
    bare: true,
  },
];

describe("raw TCP corpus", () => {
  it.each(CASES)("$name → $status", async (c) => {
    const bytes = typeof c.send === "function" ? c.send() : c.send;
    const raw = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes, "latin1");
    const withKey = Buffer.from(raw.toString("latin1").replaceAll("KEY", k.key), "latin1");
    const before = (await fx.records()).length;
    const res = await rawRequest(port, withKey, { halfClose: c.halfClose, timeoutMs: 5_000 });
    expect(res.status, res.body).toBe(c.status);
    // Every answer, Node's own included, is the contract's JSON error body.
    if (c.bare) {
      expect(res.body).toBe("");
      expect((await fx.records()).length).toBe(before);
    } else if (c.status !== 200) {
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      const body = JSON.parse(res.body) as { error: string; message: string };
      if (c.error) expect(body.error).toBe(c.error);
      expect(typeof body.message).toBe("string");
      expect((await fx.records()).length).toBe(before);
    } else {
      expect((await fx.records()).length).toBe(before + 1);
    }
    // And the next client is served.
    const next = await rawRequest(
      port,
      Buffer.from(req([auth, json]).toString("latin1").replaceAll("KEY", k.key), "latin1"),
    );
    expect(next.status).toBe(200);
  });

  it("pipelined requests on one connection are all answered", async () => {
    const one = req([auth, json]).toString("latin1").replaceAll("KEY", k.key);
    const res = await rawRequest(port, one.repeat(3), { responses: 3 });
    expect(res.statuses).toStrictEqual([200, 200, 200]);
  });
});
