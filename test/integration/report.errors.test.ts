import { request as httpRequest } from "node:http";
import type { LightMyRequestResponse } from "fastify";
import { beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/keys/key-format.js";
import {
  clientReport,
  type EdgeFixture,
  type PostOptions,
  sharedEdge,
  type TestKey,
} from "../helpers/edge-fixture.js";
import { eventually } from "../helpers/eventually.js";
import { notAtMonthEnd } from "../helpers/month-end.js";

// Every row of the contract's response table, each with the contract's body and headers, and
// for every refusal: nothing reached the queue.

let fx: EdgeFixture;
let k: TestKey;
sharedEdge((shared) => ({ fx, k } = shared));

interface ErrorBody {
  error: string;
  message: string;
  issues?: { path: string; message: string }[];
  limit?: number;
  remaining?: number;
  reset_at?: string;
  used?: number;
}

function expectError(res: LightMyRequestResponse, status: number, code: string): ErrorBody {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.json() as ErrorBody;
  expect(body.error).toBe(code);
  expect(typeof body.message).toBe("string");
  expect(body.message.length).toBeGreaterThan(0);
  return body;
}

/** Posts on `f`, expects the error, and checks that the queue did not grow. */
async function refused(
  body: unknown,
  opts: PostOptions,
  status: number,
  code: string,
  f: EdgeFixture = fx,
) {
  const before = (await f.records()).length;
  const res = await f.post(body, opts);
  const parsed = expectError(res, status, code);
  expect((await f.records()).length).toBe(before);
  return { res, body: parsed };
}

const invalidReport = async (body: unknown, path: string) => {
  const { body: parsed } = await refused(body, { key: k.key }, 400, "invalid_report");
  expect(Array.isArray(parsed.issues)).toBe(true);
  expect(parsed.issues?.length).toBeGreaterThan(0);
  for (const issue of parsed.issues ?? []) {
    expect(typeof issue.path).toBe("string");
    expect(typeof issue.message).toBe("string");
  }
  expect(parsed.issues?.map((i) => i.path)).toContain(path);
  return parsed;
};

const badChecksum = (key: string) => key.slice(0, -1) + (key.endsWith("0") ? "1" : "0");

const withLimits = (limits: Record<string, unknown>) =>
  clientReport({ limits: { ...(clientReport().limits as object), ...limits } });

describe("400 invalid_json", () => {
  it.each([
    ["truncated JSON", '{"provider": "openai", "limits": {'],
    ["not JSON at all", "provider=openai"],
    ["NaN literal", '{"provider":"openai","limits":{"requests_limit":NaN}}'],
    ["trailing garbage", '{"provider":"openai","limits":{}} x'],
    ["an empty body", ""],
  ])("%s", async (_name, body) => {
    await refused(body, { key: k.key }, 400, "invalid_json");
  });

  it("a POST without any body", async () => {
    await refused(undefined, { key: k.key }, 400, "invalid_json");
  });
});

describe("400 invalid_report", () => {
  it.each([
    ["an array", []],
    ["a string", "hello"],
    ["a number", 42],
    ["null", null],
  ])("body is %s", async (_name, body) => {
    await invalidReport(JSON.stringify(body), "(body)");
  });

  it("missing provider", async () => {
    const body = clientReport();
    delete body.provider;
    await invalidReport(body, "provider");
  });

  it.each([
    ["empty", ""],
    ["blank", "   "],
    ["a number", 7],
    ["65 characters", "p".repeat(65)],
  ])("provider is %s", async (_name, provider) => {
    await invalidReport(clientReport({ provider }), "provider");
  });

  it.each([
    ["missing", undefined],
    ["null", null],
    ["an array", [1, 2]],
    ["a string", "none"],
  ])("limits is %s", async (_name, limits) => {
    const body = clientReport({ limits });
    if (limits === undefined) delete body.limits;
    await invalidReport(body, "limits");
  });

  it.each([
    ["a number as a string", "100"],
    ["a boolean", true],
    ["an object", { value: 1 }],
    ["a string", "10"],
    ["a boolean", true],
  ])("a limit that is %s", async (_name, value) => {
    await invalidReport(withLimits({ tokens_remaining: value }), "limits.tokens_remaining");
  });

  // A 1e400 alone is stored as null with a warning (report.lenient.test.ts); a wrong type beside
  // it still refuses the report, and the refusal names the wrong type.
  it("a credit as a string, beside a credit of -1e400", async () => {
    const text = JSON.stringify(
      clientReport({ credits: { credits_limit: 0, credits_remaining: "5", request_cost: null } }),
    ).replace('"credits_limit":0', '"credits_limit":-1e400');
    expect(text).toContain("-1e400");
    await invalidReport(text, "credits.credits_remaining");
  });

  it.each([
    ["an array", []],
    ["a number", 1],
  ])("credits is %s", async (_name, credits) => {
    await invalidReport(clientReport({ credits }), "credits");
  });

  // Too long or empty is no reason to lose a report: report.lenient.test.ts.
  it.each([
    ["app", 12],
    ["model", ["gpt"]],
  ])("%s of the wrong type", async (field, value) => {
    await invalidReport(clientReport({ [field]: value }), field);
  });

  // A timestamp string that is no usable date is replaced by the receive time: report.lenient.
  it.each([
    ["a number", 1_700_000_000_000],
    ["an object", { at: "now" }],
  ])("timestamp is %s", async (_name, timestamp) => {
    await invalidReport(clientReport({ timestamp }), "timestamp");
  });

  it.each([
    ["top-level __proto__", '{"__proto__":{"x":1},'],
    ["top-level constructor", '{"constructor":{"prototype":{}},'],
    ["__proto__ escaped as \\u005f", '{"\\u005f\\u005fproto__":{"x":1},'],
  ])("%s key", async (_name, head) => {
    const text = head + JSON.stringify(clientReport()).slice(1);
    await refused(text, { key: k.key }, 400, "invalid_report");
  });

  it("__proto__ key nested in limits", async () => {
    const text = JSON.stringify(clientReport()).replace(
      '"limits":{',
      '"limits":{"__proto__":{"requests_limit":"x"},',
    );
    await refused(text, { key: k.key }, 400, "invalid_report");
  });

  it("deep nesting in an unknown field", async () => {
    const depth = 5_000;
    const text = JSON.stringify(clientReport()).replace(
      /}$/,
      `,"extra":${"[".repeat(depth)}${"]".repeat(depth)}}`,
    );
    expect(text.length).toBeLessThan(fx.config.BODY_LIMIT_BYTES);
    const { body } = await refused(text, { key: k.key }, 400, "invalid_report");
    expect(body.issues).toHaveLength(1);
    expect(body.issues?.[0]?.path).toMatch(/^extra(\.0)+$/);
  });

  it("invalid UTF-8 bytes in a string", async () => {
    const [head, tail] = JSON.stringify(clientReport({ provider: "open@@ai" })).split("@@");
    const bytes = Buffer.concat([
      Buffer.from(head ?? ""),
      Buffer.from([0xc3, 0x28, 0xff]),
      Buffer.from(tail ?? ""),
    ]);
    await invalidReport(bytes, "provider");
  });

  it("a lone surrogate in a string", async () => {
    const text = JSON.stringify(clientReport({ model: "gpt-@@" })).replace("@@", "\\ud800");
    await invalidReport(text, "model");
  });

  it("reports every issue, not only the first", async () => {
    const body = await invalidReport(
      { provider: "", limits: { requests_limit: "1" }, timestamp: 5 },
      "provider",
    );
    expect(body.issues?.map((i) => i.path)).toEqual(
      expect.arrayContaining(["provider", "limits.requests_limit", "timestamp"]),
    );
  });
});

describe("401", () => {
  const expectChallenge = (res: LightMyRequestResponse) =>
    expect(res.headers["www-authenticate"]).toBe("Bearer");

  it.each([
    ["no Authorization header", undefined],
    ["an empty header", ""],
    ["another scheme", "Basic dXNlcjpwYXNz"],
    ["Bearer without a key", "Bearer "],
  ])("missing_project_key: %s", async (_name, header) => {
    const { res } = await refused(
      clientReport(),
      { headers: { authorization: header } },
      401,
      "missing_project_key",
    );
    expectChallenge(res);
  });

  it.each([
    ["a malformed key", "not-a-key!"],
    ["a key with spaces in it", "not a key at all"],
    ["a well-formed but unknown key", generateKey()],
    ["an issued key with a bad checksum", badChecksum(generateKey())],
    ["an unknown imported-style key", "dlm_Zm9vYmFyYmF6cXV4LXJhbmRvbS1ieXRlcw"],
  ])("invalid_project_key: %s", async (_name, header) => {
    const { res } = await refused(
      clientReport(),
      { headers: { authorization: `Bearer ${header}` } },
      401,
      "invalid_project_key",
    );
    expectChallenge(res);
  });

  it("invalid_project_key: a revoked key", async () => {
    const revoked = await fx.createKey();
    expect(await fx.edge.keyStore.revoke(revoked.keyId)).toBe(true);
    const { res } = await refused(clientReport(), { key: revoked.key }, 401, "invalid_project_key");
    expectChallenge(res);
  });

  it("authentication comes before the body is looked at", async () => {
    await refused("{broken", { key: generateKey() }, 401, "invalid_project_key");
    await refused(
      "{broken",
      { headers: { "content-type": "text/plain" } },
      401,
      "missing_project_key",
    );
  });
});

describe("404 and 405", () => {
  it.each([
    ["POST", "/api/reportz"],
    ["POST", "/api/report/extra"],
    ["GET", "/"],
    ["POST", "/report"],
  ] as const)("%s %s is not_found", async (method, url) => {
    await refused(clientReport(), { key: k.key, method, url }, 404, "not_found");
  });

  it.each(["GET", "PUT", "DELETE", "PATCH", "OPTIONS"] as const)(
    "%s /api/report is method_not_allowed with Allow: POST",
    async (method) => {
      const { res } = await refused(
        method === "GET" ? undefined : clientReport(),
        { key: k.key, method },
        405,
        "method_not_allowed",
      );
      expect(res.headers.allow).toBe("POST");
    },
  );

  it("HEAD /api/report is 405 with Allow: POST", async () => {
    const res = await fx.post(undefined, { key: k.key, method: "HEAD" });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe("POST");
  });
});

describe("415 unsupported_media_type", () => {
  it.each([
    ["text/plain", { "content-type": "text/plain" }],
    ["a missing content type", { "content-type": undefined }],
    ["charset=latin1", { "content-type": "application/json; charset=latin1" }],
    ["form data", { "content-type": "application/x-www-form-urlencoded" }],
  ])("%s", async (_name, headers) => {
    await refused(
      JSON.stringify(clientReport()),
      { key: k.key, headers },
      415,
      "unsupported_media_type",
    );
  });
});

describe("413 payload_too_large", () => {
  let port = 0;

  beforeAll(async () => {
    await fx.edge.app.listen({ host: "127.0.0.1", port: 0 });
    const address = fx.edge.app.server.address();
    port = typeof address === "object" && address ? address.port : 0;
  });

  const oversized = () =>
    JSON.stringify(clientReport({ padding: "x".repeat(fx.config.BODY_LIMIT_BYTES) }));

  it("a body over the limit with its length declared", async () => {
    await refused(oversized(), { key: k.key }, 413, "payload_too_large");
  });

  it("size is checked before the media type", async () => {
    await refused(
      oversized(),
      { key: k.key, headers: { "content-type": "text/plain" } },
      413,
      "payload_too_large",
    );
  });

  it("a body of exactly the limit is read", async () => {
    const base = JSON.stringify(clientReport({ padding: "" }));
    const body = JSON.stringify(
      clientReport({ padding: "x".repeat(fx.config.BODY_LIMIT_BYTES - base.length) }),
    );
    expect(Buffer.byteLength(body)).toBe(fx.config.BODY_LIMIT_BYTES);
    const res = await fx.post(body, { key: k.key });
    expect(res.statusCode, res.body).toBe(200);
  });

  /** A raw HTTP exchange: `send` writes the body (or not); resolves with the response. */
  function rawPost(
    headers: Record<string, string | number>,
    send: (req: ReturnType<typeof httpRequest>) => void,
  ): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: "127.0.0.1", port, method: "POST", path: "/api/report", headers, agent: false },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => {
            body += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          res.on("error", reject);
        },
      );
      // The server may answer and close while the body is still being written.
      req.on("error", (err) => {
        if (!req.writableEnded) return;
        reject(err);
      });
      send(req);
    });
  }

  it("a declared length over the limit is refused before the body is sent", async () => {
    const before = (await fx.records()).length;
    const res = await rawPost(
      {
        authorization: `Bearer ${k.key}`,
        "content-type": "application/json",
        "content-length": fx.config.BODY_LIMIT_BYTES * 4,
      },
      (req) => req.flushHeaders(),
    );
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).error).toBe("payload_too_large");
    expect((await fx.records()).length).toBe(before);
  });

  it("a chunked body that grows over the limit", async () => {
    const before = (await fx.records()).length;
    const body = Buffer.from(oversized());
    const res = await rawPost(
      {
        authorization: `Bearer ${k.key}`,
        "content-type": "application/json",
        "transfer-encoding": "chunked",
      },
      (req) => {
        for (let i = 0; i < body.length; i += 4096) req.write(body.subarray(i, i + 4096));
        req.end();
      },
    );
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).error).toBe("payload_too_large");
    expect((await fx.records()).length).toBe(before);
  });

  it("a chunked body under the limit is accepted", async () => {
    const body = Buffer.from(JSON.stringify(clientReport({ provider: "chunked" })));
    const res = await rawPost(
      {
        authorization: `Bearer ${k.key}`,
        "content-type": "application/json",
        "transfer-encoding": "chunked",
      },
      (req) => {
        for (let i = 0; i < body.length; i += 50) req.write(body.subarray(i, i + 50));
        req.end();
      },
    );
    expect(res.status, res.body).toBe(200);
    const { id } = JSON.parse(res.body) as { id: string };
    expect((await fx.records()).find((r) => r.report_id === id)?.provider).toBe("chunked");
  });
});

describe("429", () => {
  it("rate_limited: the burst limit, with limit headers and body", async () => {
    // A bucket of 2 that refills one report a second.
    const small = await fx.createKey({ plan: "free", overrides: { burst: 1, capacity: 2 } });
    const before = (await fx.records()).length;
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 5 }, () => fx.post(clientReport(), { key: small.key })),
    );
    const refilled = Math.floor((Date.now() - started) / 1_000);
    const ok = results.filter((r) => r.statusCode === 200);
    const limited = results.filter((r) => r.statusCode !== 200);
    expect(ok.length).toBeGreaterThanOrEqual(2);
    expect(ok.length).toBeLessThanOrEqual(2 + refilled);
    expect(limited.length).toBe(5 - ok.length);
    for (const res of limited) {
      const body = expectError(res, 429, "rate_limited");
      expect(body.limit).toBe(1);
      expect(body.remaining).toBe(0);
      const resetAt = Date.parse(body.reset_at ?? "");
      expect(resetAt).toBeGreaterThanOrEqual(started);
      expect(resetAt).toBeLessThanOrEqual(Date.now() + 1_000);
      expect(res.headers["retry-after"]).toBe("1");
      expect(res.headers["ratelimit-limit"]).toBe("1");
      expect(res.headers["ratelimit-remaining"]).toBe("0");
      expect(res.headers["ratelimit-reset"]).toBe("1");
    }
    expect((await fx.records()).length).toBe(before + ok.length);
  });

  it("rate_limited comes before the body is looked at", async () => {
    const small = await fx.createKey({ plan: "free", overrides: { burst: 1, capacity: 1 } });
    await Promise.all([
      fx.post("{broken", { key: small.key }),
      fx.post("{broken", { key: small.key }),
    ]).then((results) => {
      expect(results.map((r) => r.statusCode).sort()).toStrictEqual([400, 429]);
    });
  });

  it("quota_exceeded: the monthly quota, counting only valid reports", async () => {
    await notAtMonthEnd();
    const monthEndOf = (t: Date) => Date.UTC(t.getUTCFullYear(), t.getUTCMonth() + 1, 1);
    const q = await fx.createKey({ plan: "free", overrides: { monthly: 3, burst: 100 } });
    // Refused reports do not use the quota up.
    for (let i = 0; i < 4; i++) {
      await refused(clientReport({ provider: "" }), { key: q.key }, 400, "invalid_report");
    }
    await refused("{broken", { key: q.key }, 400, "invalid_json");
    for (let i = 0; i < 3; i++) {
      const res = await fx.post(clientReport(), { key: q.key });
      expect(res.statusCode, res.body).toBe(200);
    }
    const { res, body } = await refused(clientReport(), { key: q.key }, 429, "quota_exceeded");
    expect(body.limit).toBe(3);
    expect(body.remaining).toBe(0);
    expect(body.used).toBe(3);
    const monthEnd = monthEndOf(new Date());
    expect(Math.abs(Date.parse(body.reset_at ?? "") - monthEnd)).toBeLessThan(2_000);
    const retryAfter = Number(res.headers["retry-after"]);
    expect(Math.abs(retryAfter - (monthEnd - Date.now()) / 1000)).toBeLessThan(3);
    expect(res.headers["ratelimit-limit"]).toBe("3");
    expect(res.headers["ratelimit-remaining"]).toBe("0");
    expect(res.headers["ratelimit-reset"]).toBe(String(retryAfter));
    // Validation still comes first: an invalid report is a 400, not a 429.
    await refused(clientReport({ provider: "" }), { key: q.key }, 400, "invalid_report");
    expect((await fx.records()).filter((r) => r.project_id === q.projectId)).toHaveLength(3);
  });
});

describe("429 for failed authentication, per IP", () => {
  let af: EdgeFixture;
  sharedEdge(({ fx }) => (af = fx), {
    env: { AUTH_FAILURES_PER_IP: "3", AUTH_FAILURE_WINDOW_S: "60" },
  });

  it("refuses an IP after N bad keys, even with a good key; other IPs are unaffected", async () => {
    const good = await af.createKey();
    const attacker = "198.51.100.7";
    const bad = [generateKey(), "junk-key-junk-key", generateKey()];
    for (const key of bad) {
      await refused(
        clientReport(),
        { key, remoteAddress: attacker },
        401,
        "invalid_project_key",
        af,
      );
    }
    const { res, body } = await refused(
      clientReport(),
      { key: generateKey(), remoteAddress: attacker },
      429,
      "rate_limited",
      af,
    );
    expect(body.limit).toBe(3);
    expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
    await refused(
      clientReport(),
      { key: good.key, remoteAddress: attacker },
      429,
      "rate_limited",
      af,
    );
    const other = await af.post(clientReport(), { key: good.key, remoteAddress: "203.0.113.9" });
    expect(other.statusCode, other.body).toBe(200);
  });
});

describe("503 unavailable when the backlog is over its bound", () => {
  let bf: EdgeFixture;
  sharedEdge(({ fx }) => (bf = fx), {
    env: { BACKLOG_MAX_JOBS: "1", BACKLOG_CHECK_INTERVAL_MS: "10" },
  });

  it("answers 503 with Retry-After, enqueues nothing, uses no quota, and recovers", async () => {
    const q = await bf.createKey({ plan: "free", overrides: { monthly: 3, burst: 100 } });
    // Two reports one after the other: two jobs, over the bound of one.
    for (let i = 0; i < 2; i++) {
      const res = await bf.post(clientReport(), { key: q.key });
      expect(res.statusCode, res.body).toBe(200);
    }
    await eventually(async () => {
      const ready = await bf.edge.app.inject({ method: "GET", url: "/readyz" });
      expect(ready.statusCode).toBe(503);
    });
    for (let i = 0; i < 3; i++) {
      const { res } = await refused(clientReport(), { key: q.key }, 503, "unavailable", bf);
      expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
    }
    // The checks before the enqueue still answer first.
    await refused(clientReport({ limits: null }), { key: q.key }, 400, "invalid_report", bf);
    await refused("[", { key: q.key }, 400, "invalid_json", bf);

    // Workers catch up: reports are taken again, and the 503s did not use the quota.
    await bf.edge.queue.drain();
    await eventually(async () => {
      const ready = await bf.edge.app.inject({ method: "GET", url: "/readyz" });
      expect(ready.statusCode).toBe(200);
    });
    const third = await bf.post(clientReport(), { key: q.key });
    expect(third.statusCode, third.body).toBe(200);
    await refused(clientReport(), { key: q.key }, 429, "quota_exceeded", bf);
  });
});

describe("other endpoints", () => {
  it("/healthz and /readyz answer 200 with JSON", async () => {
    const health = await fx.edge.app.inject({ method: "GET", url: "/healthz" });
    expect(health.statusCode).toBe(200);
    const ready = await fx.edge.app.inject({ method: "GET", url: "/readyz" });
    expect(ready.statusCode).toBe(200);
    // Anyone learns ok or not; the figures need the metrics token (security.readyz.test.ts).
    expect(ready.json()).toStrictEqual({ status: "ok" });
  });
});
