import { connect } from "node:net";

// One request as raw bytes on a fresh TCP connection, and the first response read back as text:
// for requests no HTTP client library would send.

export interface RawResponse {
  /** 0 when the server closed the connection without answering. */
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Every response on the connection, for pipelined requests. */
  statuses: number[];
  ms: number;
}

export interface RawOptions {
  /** Send FIN after the bytes (a client that gives up on the rest of its request). */
  halfClose?: boolean;
  /** Give up waiting after this long: the server hung. */
  timeoutMs?: number;
  /** Wait for this many responses (pipelining). */
  responses?: number;
}

export class RawHang extends Error {
  override name = "RawHang";
}

function parse(data: Buffer) {
  const out: { status: number; headers: Record<string, string>; body: string }[] = [];
  let rest = data;
  for (;;) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) return out;
    const [statusLine = "", ...lines] = rest.subarray(0, end).toString("latin1").split("\r\n");
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(":");
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    // 1xx responses have no body and are followed by the real one.
    const length = status < 200 ? 0 : Number(headers["content-length"] ?? 0);
    const bodyStart = end + 4;
    if (rest.length - bodyStart < length) return out;
    const body = rest.subarray(bodyStart, bodyStart + length).toString("utf8");
    if (status >= 200) out.push({ status, headers, body });
    rest = rest.subarray(bodyStart + length);
    if (rest.length === 0) return out;
  }
}

export function rawRequest(
  port: number,
  bytes: string | Buffer,
  opts: RawOptions = {},
): Promise<RawResponse> {
  const want = opts.responses ?? 1;
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const sock = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) return reject(err);
      const out = parse(Buffer.concat(chunks));
      const first = out[0];
      resolve({
        status: first?.status ?? 0,
        headers: first?.headers ?? {},
        body: first?.body ?? "",
        statuses: out.map((r) => r.status),
        ms: performance.now() - started,
      });
    };
    const timer = setTimeout(
      () => finish(new RawHang(`no answer within ${opts.timeoutMs ?? 5_000} ms`)),
      opts.timeoutMs ?? 5_000,
    );
    sock.on("data", (c: Buffer) => {
      chunks.push(c);
      if (parse(Buffer.concat(chunks)).length >= want) finish();
    });
    sock.on("error", () => {});
    sock.on("close", () => finish());
    sock.on("connect", () => {
      if (opts.halfClose) sock.end(bytes);
      else sock.write(bytes);
    });
  });
}
