import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHeadroomClient, reportFrom } from "../../src/client/index.js";
import { eventually } from "../helpers/eventually.js";
import { type ProjectKeys, type ReadStack, startReadStack } from "../helpers/read-stack.js";

// GET /api/v1/advice through the real edge, worker and read API (docs/pools.md): go, wait with
// the binding window and a retry_after_ms right at the answer's moment, unknown with its reason,
// alternatives; a read key or the project's own report key may ask; hostile parameters are a
// 400, never a 500; Cache-Control and ETag; and the client library against the real service.

const SECRET = "integration-pool-secret-0123456789abcdef";
let s: ReadStack;
let keys: ProjectKeys;
let other: ProjectKeys;
let baseUrl: string;

/** Headers of an OpenAI answer: `remaining` tokens of 10,000, the window resetting in 40 s. */
const openaiHeaders = (remaining: number) => ({
  "openai-organization": "org-advice-test-0001",
  "x-ratelimit-limit-tokens": "10000",
  "x-ratelimit-remaining-tokens": String(remaining),
  "x-ratelimit-reset-tokens": "40s",
  "x-ratelimit-limit-requests": "500",
  "x-ratelimit-remaining-requests": "499",
  "x-ratelimit-reset-requests": "120ms",
});

interface AdviceBody {
  at: string;
  verdict: string;
  reason: string | null;
  retry_after_ms: number | null;
  binding: { dimension: string; resets_at: string | null } | null;
  pool: { pool: string; kind: string; members: string[] } | null;
  alternatives: { provider: string; model: string | null }[];
}

const ask = async (key: string, query: string) => {
  const res = await s.get(`/api/v1/advice?${query}`, key);
  return { res, body: res.json() as AdviceBody };
};

beforeAll(async () => {
  s = await startReadStack({ POOL_SECRET: SECRET });
  keys = await s.project();
  other = await s.project();
  // The client's reportFrom: a provider's fetch response's headers, as they came.
  const gpt4o = reportFrom(new Response("{}", { headers: openaiHeaders(9_000) }), {
    provider: "openai",
    model: "gpt-4o",
    app: "chat",
  });
  const mini = reportFrom(new Response("{}", { headers: openaiHeaders(10_000) }), {
    provider: "openai",
    model: "gpt-4o-mini",
    app: "chat",
  });
  await s.send(keys.report, [
    gpt4o as unknown as Record<string, unknown>,
    mini as unknown as Record<string, unknown>,
    {
      provider: "groq",
      model: "llama",
      app: "x",
      limits: { requests_limit: 10, requests_remaining: 9 },
    },
  ]);
  await s.stored(keys.project, 3);
  const address = await s.api.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = address;
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe("GET /api/v1/advice", () => {
  it("says go when the pool has room for what is asked", async () => {
    await eventually(async () => {
      const { res, body } = await ask(keys.read, "provider=openai&model=gpt-4o&tokens=500");
      expect(res.statusCode, res.body).toBe(200);
      expect(body.verdict).toBe("go");
      expect(body.pool?.kind).toBe("account");
      expect(body.pool?.members).toEqual(["chat"]);
    });
  });

  it("says wait with the binding window and retry_after_ms right at the answer's moment", async () => {
    await eventually(async () => {
      const { body } = await ask(keys.read, "provider=openai&model=gpt-4o&tokens=9500");
      expect(body.verdict).toBe("wait");
      expect(body.binding?.dimension).toBe("tokens");
      const resetsAt = Date.parse(body.binding?.resets_at ?? "");
      expect(body.retry_after_ms).toBe(Math.max(0, resetsAt - Date.parse(body.at)));
      expect(body.retry_after_ms).toBeGreaterThan(0);
      expect(body.retry_after_ms).toBeLessThanOrEqual(40_000);
    });
  });

  it("is unknown for a model never reported, with alternatives of the same provider first", async () => {
    await eventually(async () => {
      const { body } = await ask(keys.read, "provider=openai&model=o3&tokens=10");
      expect(body.verdict).toBe("unknown");
      expect(body.reason).toBe("no_report");
      expect(body.alternatives.map((a) => [a.provider, a.model])).toEqual([
        ["openai", "gpt-4o-mini"],
        ["openai", "gpt-4o"],
        ["groq", "llama"],
      ]);
    });
  });

  it("answers a report key for its own project only, and refuses a key of no data scope", async () => {
    await eventually(async () => {
      expect((await ask(keys.report, "provider=openai&model=gpt-4o")).body.verdict).toBe("go");
    });
    const theirs = await ask(other.report, "provider=openai&model=gpt-4o");
    expect(theirs.res.statusCode).toBe(200);
    expect(theirs.body).toMatchObject({
      verdict: "unknown",
      reason: "no_report",
      alternatives: [],
    });
    expect((await s.get("/api/v1/advice?provider=openai&model=gpt-4o")).statusCode).toBe(401);
    const manage = (
      await s.edge.keyStore.create(keys.project, { defaultPlan: "unlimited", scope: "manage" })
    ).key;
    expect((await s.get("/api/v1/advice?provider=openai&model=gpt-4o", manage)).statusCode).toBe(
      403,
    );
    expect((await s.get("/api/v1/advice?provider=openai&model=gpt-4o", "hr_nope")).statusCode).toBe(
      401,
    );
  });

  it("answers Cache-Control of a second at most and an ETag (304 when it matches)", async () => {
    const { res } = await ask(keys.read, "provider=groq&model=llama");
    expect(res.headers["cache-control"]).toBe("private, max-age=1");
    const etag = String(res.headers.etag);
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await s.get("/api/v1/advice?provider=groq&model=llama", keys.read, {
      "if-none-match": etag,
    });
    // Same figures within the same millisecond are rare; either answer is right, never a 5xx.
    expect([200, 304]).toContain(again.statusCode);
  });

  it("answers hostile parameters with a 400, never a 500", async () => {
    for (const q of [
      "",
      "model=gpt-4o",
      "provider=openai",
      "provider=openai&model=gpt-4o&tokens=-1",
      "provider=openai&model=gpt-4o&tokens=1e99",
      "provider=openai&model=gpt-4o&tokens=99999999999999",
      "provider=openai&model=gpt-4o&tokens=abc",
      "provider=openai&provider=groq&model=gpt-4o",
      "provider=openai&model=gpt-4o&pool=a%20b",
      `provider=openai&model=${"m".repeat(257)}`,
      "provider=openai&model=gpt-4o&color=red",
      "provider=%00&model=gpt-4o&requests=0x10",
    ]) {
      const res = await s.get(`/api/v1/advice?${q}`, keys.read);
      expect(res.statusCode, q).toBe(400);
    }
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(
          fc.constantFrom("provider", "model", "app", "pool", "requests", "tokens", "x"),
          fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.nat().map(String)),
        ),
        async (params) => {
          const res = await s.get(`/api/v1/advice?${new URLSearchParams(params)}`, keys.read);
          expect([200, 400]).toContain(res.statusCode);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("headroom/client", () => {
  it("advises from the real service, keeps an answer at most its max-age, and counts down", async () => {
    let t = Date.now();
    let asked = 0;
    const client = createHeadroomClient({
      baseUrl,
      key: keys.report,
      now: () => t,
      fetch: (input, init) => {
        asked++;
        return fetch(input, init);
      },
    });
    await eventually(async () => {
      expect(
        (await client.advise({ provider: "openai", model: "gpt-4o", tokens: 9_500 })).verdict,
      ).toBe("wait");
    });
    const n = asked;
    const first = await client.advise({ provider: "openai", model: "gpt-4o", tokens: 9_500 });
    t += 400;
    const cached = await client.advise({ provider: "openai", model: "gpt-4o", tokens: 9_500 });
    expect(asked).toBe(n);
    if (first.retry_after_ms !== null && first.retry_after_ms >= 400)
      expect(cached.retry_after_ms).toBe((first.retry_after_ms ?? 0) - 400);
    t += 700;
    await client.advise({ provider: "openai", model: "gpt-4o", tokens: 9_500 });
    expect(asked).toBe(n + 1);
    // A service that cannot answer is unknown, never a throw.
    const down = createHeadroomClient({ baseUrl: "http://127.0.0.1:1", key: keys.read });
    expect((await down.advise({ provider: "openai", model: "gpt-4o" })).verdict).toBe("unknown");
  });
});
