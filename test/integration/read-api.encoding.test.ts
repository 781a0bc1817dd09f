import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// /usage and /headroom answers are kept encoded: compressed copies and 304s must be the plain
// answer, and an answer (or its tag) never reaches another project, even one whose figures are
// the same.

let s: ReadStack;
let a: ProjectKeys;
let b: ProjectKeys;

/** Each encoding, the Accept-Encoding that picks it, and its decoder. */
const ENCODINGS = [
  ["gzip", "gzip, deflate", gunzipSync],
  ["br", "gzip, deflate, br", brotliDecompressSync],
] as const;

const USAGE = "/api/v1/usage?window=minute&group_by=provider,model";
const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();

beforeAll(async () => {
  // Answers shared for the whole file, as polling dashboards find them.
  s = await startReadStack({
    READ_CACHE_TTL_MS: "60000",
    READ_CACHE_STALE_MS: "300000",
    // A /headroom answer is held at most 10 s: long enough for a test's requests to share one.
    READ_HEADROOM_TTL_MS: "10000",
  });
  [a, b] = [await s.project(), await s.project()];
  // The same reports in both projects: their answers have the same bytes.
  const reports = Array.from({ length: 8 }, (_, i) => ({
    app: "chat",
    provider: i % 2 === 0 ? "openai" : "anthropic",
    model: "m",
    timestamp: minutesAgo(30 + i * 5),
    limits: {
      requests_limit: 100,
      requests_remaining: 90 - i,
      tokens_limit: null,
      tokens_remaining: null,
      reset_requests_ms: 1000,
      reset_tokens_ms: null,
    },
  }));
  await Promise.all([s.send(a.report, reports), s.send(b.report, reports)]);
  await Promise.all([s.stored(a.project, 8), s.stored(b.project, 8)]);
});

afterAll(async () => {
  await s?.close();
});

describe("encoded /usage answers", () => {
  it("serves the plain JSON with a strong ETag, varying by Accept and Accept-Encoding", async () => {
    const res = await s.get(USAGE, a.read);
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(res.headers["content-encoding"]).toBeUndefined();
    expect(res.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(res.headers.vary).toBe("Accept, Accept-Encoding");
    expect(res.json().points).toHaveLength(8);
    expect(res.rawPayload.length).toBeGreaterThan(1_024);
  });

  it.each(ENCODINGS)(
    "serves %s that decodes to the plain answer's bytes",
    async (encoding, accept, decode) => {
      const plain = await s.get(USAGE, a.read);
      const res = await s.get(USAGE, a.read, { "accept-encoding": accept });
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-encoding"]).toBe(encoding);
      expect(res.headers.etag).toBe(`W/${plain.headers.etag}`);
      expect(res.headers.vary).toBe("Accept, Accept-Encoding");
      expect(Number(res.headers["content-length"])).toBe(res.rawPayload.length);
      expect(res.rawPayload.length).toBeLessThan(plain.rawPayload.length);
      expect(decode(res.rawPayload).equals(plain.rawPayload)).toBe(true);
    },
  );

  it("answers 304 with no body to the answer's own tag, strong or weak", async () => {
    const plain = await s.get(USAGE, a.read);
    const etag = plain.headers.etag as string;
    for (const tag of [etag, `W/${etag}`, `"other", ${etag}`]) {
      const res = await s.get(USAGE, a.read, { "if-none-match": tag, "accept-encoding": "gzip" });
      expect(res.statusCode).toBe(304);
      expect(res.rawPayload.length).toBe(0);
      expect(res.headers.etag).toBe(etag);
    }
    const other = await s.get(USAGE, a.read, { "if-none-match": '"other"' });
    expect(other.statusCode).toBe(200);
    expect(other.rawPayload.equals(plain.rawPayload)).toBe(true);
  });

  it("never gives one project's tag to another, even with the same figures", async () => {
    const fromA = await s.get(USAGE, a.read, { "accept-encoding": "gzip" });
    const fromB = await s.get(USAGE, b.read, { "accept-encoding": "gzip" });
    expect(fromB.headers.etag).not.toBe(fromA.headers.etag);
    const plainB = await s.get(USAGE, b.read);
    const res = await s.get(USAGE, b.read, {
      "if-none-match": fromA.headers.etag as string,
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe(plainB.headers.etag);
    expect(gunzipSync(fromB.rawPayload).equals(plainB.rawPayload)).toBe(true);
  });

  it("compresses answers to explicit ranges, which are not shared, the same way", async () => {
    const to = new Date(Math.ceil(Date.now() / 60_000) * 60_000).toISOString();
    const from = new Date(Date.parse(to) - 86_400_000).toISOString();
    const url = `${USAGE}&from=${from}&to=${to}`;
    const plain = await s.get(url, a.read);
    const res = await s.get(url, a.read, { "accept-encoding": "gzip" });
    expect(res.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(res.rawPayload).equals(plain.rawPayload)).toBe(true);
    expect(plain.json().points).toHaveLength(8);
  });

  it("leaves CSV and error answers as they were", async () => {
    const csv = await s.get(`${USAGE}&format=csv`, a.read, { "accept-encoding": "gzip" });
    expect(csv.statusCode).toBe(200);
    expect(csv.headers["content-type"]).toBe("text/csv; charset=utf-8");
    expect(csv.headers["content-encoding"]).toBeUndefined();
    expect(csv.headers.etag).toBeUndefined();
    const bad = await s.get(`${USAGE}&group_by=nope`, a.read, { "accept-encoding": "gzip" });
    expect(bad.statusCode).toBe(400);
    expect(bad.headers["content-encoding"]).toBeUndefined();
    expect(bad.json()).toMatchObject({ error: "invalid_query" });
  });
});

describe("encoded /headroom answers", () => {
  const HEADROOM = "/api/v1/headroom";

  type Answer = Awaited<ReturnType<ReadStack["get"]>>;
  /**
   * A plain request and one with `headers` that met the same held answer (its tag, or a 304 to
   * it): an answer is made again once it is 10 s old, so a pair that straddled that is asked again.
   */
  async function sameAnswer(
    headersFor: (plain: Answer) => Record<string, string>,
  ): Promise<[Answer, Answer]> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const plain = await s.get(HEADROOM, a.read);
      const res = await s.get(HEADROOM, a.read, headersFor(plain));
      const tag = (res.headers.etag as string | undefined)?.replace(/^W\//, "");
      if (tag === plain.headers.etag) return [plain, res];
      if (Date.now() > deadline) throw new Error("no two requests met the same /headroom answer");
    }
  }

  it.each(ENCODINGS)(
    "serves %s that decodes to the plain answer's bytes, with its tag",
    async (encoding, accept, decode) => {
      const [plain, res] = await sameAnswer(() => ({ "accept-encoding": accept }));
      expect(plain.statusCode).toBe(200);
      expect(plain.headers["content-encoding"]).toBeUndefined();
      expect(plain.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(plain.json().series).toHaveLength(2);
      expect(res.headers["content-encoding"]).toBe(encoding);
      expect(res.headers.vary).toBe("Accept-Encoding");
      expect(res.headers["cache-control"]).toBe("private, no-cache");
      expect(res.rawPayload.length).toBeLessThan(plain.rawPayload.length);
      expect(decode(res.rawPayload).equals(plain.rawPayload)).toBe(true);
    },
  );

  it("answers 304 to the held answer's tag; another project's request with that tag gets its own answer", async () => {
    const [plain, res] = await sameAnswer((p) => ({
      "if-none-match": `"other", W/${p.headers.etag as string}`,
      "accept-encoding": "gzip",
    }));
    expect(res.statusCode).toBe(304);
    expect(res.rawPayload.length).toBe(0);
    expect(res.headers.etag).toBe(plain.headers.etag);
    const fromB = await s.get(HEADROOM, b.read, { "if-none-match": plain.headers.etag as string });
    expect(fromB.statusCode).toBe(200);
    expect(fromB.headers.etag).not.toBe(plain.headers.etag);
    expect(fromB.json().series).toHaveLength(2);
  });
});
