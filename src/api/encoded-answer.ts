import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from "node:zlib";
import type { FastifyReply, FastifyRequest } from "fastify";

// A JSON answer as bytes, kept with the answer it encodes: an answer shared by many readers (the
// query cache's) is serialised once, compressed at most once per encoding (on zlib's threads,
// before a refreshed answer is published, or when a reader first accepts an encoding), and sent
// to each reader as a buffer. Its ETag comes from the bytes and the project, so a reader that
// already holds the answer gets a 304, and a tag never matches another project's answer.

export type Encoding = "br" | "gzip";

export interface EncodedAnswer {
  identity: Buffer;
  /** Strong, of the identity bytes; compressed copies carry it weak (W/), as nginx does. */
  etag: string;
  compressed: Partial<Record<Encoding, Promise<Buffer | null>>>;
}

/** Below this, compression saves less than the headers it costs. */
const MIN_COMPRESS_BYTES = 1_024;

const brotli = promisify(brotliCompress);
const gz = promisify(gzip);

/**
 * Up to this, an answer is compressed at once on the event loop, at brotli's or gzip's fastest
 * level (83 KB of JSON: ~0.08 ms br, 0.15 ms gzip, to 3.7 and 4.8 KB): a trip to zlib's threads
 * costs the reader two waits for a core, milliseconds on a busy machine (docs/benchmarks.md,
 * "/headroom compressed"). Larger answers (a day of minutes, MBs) go to the threads.
 */
const SYNC_COMPRESS_MAX_BYTES = 256 * 1024;

const COMPRESS_NOW: Record<Encoding, (b: Buffer) => Buffer> = {
  br: (b) =>
    brotliCompressSync(b, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: 1,
        [constants.BROTLI_PARAM_SIZE_HINT]: b.length,
      },
    }),
  gzip: (b) => gzipSync(b, { level: 1 }),
};

const COMPRESS: Record<Encoding, (b: Buffer) => Promise<Buffer>> = {
  // Quality 5: most of brotli's gain over gzip at about gzip's cost.
  br: (b) =>
    brotli(b, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: 5,
        [constants.BROTLI_PARAM_SIZE_HINT]: b.length,
      },
    }),
  gzip: (b) => gz(b),
};

const answers = new WeakMap<object, EncodedAnswer>();

/**
 * The encoded form of `value`, made once per answer object. `project` goes into the ETag: an
 * answer object belongs to one project (the query cache keys by project), so the first call's
 * project is the answer's.
 */
export function encodeAnswer(value: object, project: string): EncodedAnswer {
  let e = answers.get(value);
  if (e === undefined) {
    e = encodeJson(Buffer.from(JSON.stringify(value)), project);
    answers.set(value, e);
  }
  return e;
}

/** An answer's JSON bytes, as made by its owner (usage.ts builds them from kept parts). */
export function encodeJson(identity: Buffer, project: string): EncodedAnswer {
  const hash = createHash("sha1").update(project).update("\0").update(identity);
  return { identity, etag: `"${hash.digest("base64url")}"`, compressed: {} };
}

/** The encoding to send, by the request's Accept-Encoding (RFC 9110 12.5.3): br, gzip or none. */
export function negotiateEncoding(header: string | string[] | undefined): Encoding | null {
  if (typeof header !== "string") return header === undefined ? null : chooseEncoding(header);
  // Every poll of /headroom asks, and a deployment's readers send one or two headers: the last
  // one's choice is kept (one entry, so a reader's header never grows memory).
  if (header !== lastHeader) {
    lastChoice = chooseEncoding(header);
    lastHeader = header;
  }
  return lastChoice;
}

let lastHeader: string | undefined;
let lastChoice: Encoding | null = null;

function chooseEncoding(header: string | string[]): Encoding | null {
  const q: Record<string, number> = {};
  for (const part of (Array.isArray(header) ? header.join(",") : header).split(",")) {
    const [name = "", ...params] = part.split(";").map((s) => s.trim());
    if (name === "") continue;
    let weight = 1;
    for (const p of params) {
      const m = /^q=([0-9.]+)$/i.exec(p);
      if (m) weight = Number(m[1]);
    }
    q[name.toLowerCase()] = Number.isFinite(weight) ? weight : 0;
  }
  const of = (name: Encoding) => q[name] ?? q["*"] ?? 0;
  const br = of("br");
  const gzipQ = Math.max(of("gzip"), q["x-gzip"] ?? 0);
  if (br > 0 && br >= gzipQ) return "br";
  if (gzipQ > 0) return "gzip";
  return null;
}

/** Whether If-None-Match names this answer (weak comparison, RFC 9110 13.1.2). */
export function matchesEtag(header: string | string[] | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const text = Array.isArray(header) ? header.join(",") : header;
  if (text.trim() === "*") return true;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  return text.split(",").some((tag) => opaque(tag) === opaque(etag));
}

/**
 * Compresses `e` in `encoding` now, so that an answer refreshed behind the readers' backs is
 * published ready to send: no reader waits for its compression.
 */
export async function precompress(e: EncodedAnswer, encoding: Encoding) {
  if (e.identity.length >= MIN_COMPRESS_BYTES) await compressed(e, encoding);
}

function compressed(e: EncodedAnswer, encoding: Encoding): Promise<Buffer | null> {
  let p = e.compressed[encoding];
  if (p === undefined) {
    // A failure serves the identity bytes rather than failing the request.
    if (e.identity.length <= SYNC_COMPRESS_MAX_BYTES) {
      try {
        p = Promise.resolve(COMPRESS_NOW[encoding](e.identity));
      } catch {
        p = Promise.resolve(null);
      }
    } else {
      p = COMPRESS[encoding](e.identity).catch(() => null);
    }
    e.compressed[encoding] = p;
  }
  return p;
}

/**
 * Sends `e` as the request asks for it: 304, compressed, or the JSON bytes as they are. `vary`
 * names the other request headers that chose this answer (e.g. Accept, where CSV is offered).
 */
export async function sendEncoded(
  req: FastifyRequest,
  reply: FastifyReply,
  e: EncodedAnswer,
  vary: string[] = [],
) {
  reply.header("vary", [...vary, "Accept-Encoding"].join(", "));
  reply.header("cache-control", "private, no-cache");
  if (matchesEtag(req.headers["if-none-match"], e.etag)) {
    return reply.code(304).header("etag", e.etag).send();
  }
  reply.type("application/json; charset=utf-8");
  const encoding =
    e.identity.length >= MIN_COMPRESS_BYTES
      ? negotiateEncoding(req.headers["accept-encoding"])
      : null;
  const body = encoding === null ? null : await compressed(e, encoding);
  if (encoding === null || body === null) return reply.header("etag", e.etag).send(e.identity);
  return reply.header("etag", `W/${e.etag}`).header("content-encoding", encoding).send(body);
}
