import Fastify, { type FastifyInstance } from "fastify";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_PLANS } from "../../src/config.js";
import { createLimits } from "../../src/edge/limits.js";
import { type AuthDeps, createAuthenticate } from "../../src/http/authenticate.js";
import { errorHandler } from "../../src/http/error-handler.js";
import { HttpError } from "../../src/http/errors.js";
import { createKeyCache } from "../../src/keys/key-cache.js";
import { generateKey } from "../../src/keys/key-format.js";
import type { KeyLookup } from "../../src/keys/key-store.js";

// Who is sending: `Authorization: Bearer <key>`, checked with a fake key lookup behind the same
// function interface as the real cache, through a tiny app with the real error handler.

const project: KeyLookup = {
  keyId: "key_1",
  projectId: "prj_1",
  scope: "report",
  plan: "free",
  overrides: {},
};
const goodKey = generateKey();

let app: FastifyInstance | undefined;

/**
 * A fake of the failure limiter: an IP is refused once it has `perIp` failures. An attempt takes
 * one before it is known to fail (`reserveAuthAttempt`) and gives it back when it succeeds.
 */
function fakeLimits(perIp = 100) {
  const failures = new Map<string, number>();
  const add = (ip: string, n: number) => {
    const left = (failures.get(ip) ?? 0) + n;
    if (left === 0) failures.delete(ip);
    else failures.set(ip, left);
  };
  const limits: AuthDeps["limits"] = {
    async checkAuthFailures(ip) {
      if ((failures.get(ip) ?? 0) >= perIp) throw new HttpError("rate_limited", "too many");
    },
    recordAuthFailure(ip) {
      add(ip, 1);
    },
    async reserveAuthAttempt(ip) {
      if ((failures.get(ip) ?? 0) >= perIp) throw new HttpError("rate_limited", "too many");
      add(ip, 1);
    },
    releaseAuthAttempt(ip) {
      add(ip, -1);
    },
    refuseClient(ip) {
      add(ip, perIp);
    },
  };
  return { limits, failures };
}

function setup(lookup: AuthDeps["lookupKey"], limits: AuthDeps["limits"] = fakeLimits().limits) {
  const looked: string[] = [];
  const authenticate = createAuthenticate({
    // What the cache can tell without a look-up (peek, servedBefore) passes through.
    lookupKey: Object.assign(
      (key: string) => {
        looked.push(key);
        return lookup(key);
      },
      { peek: lookup.peek, servedBefore: lookup.servedBefore },
    ),
    limits,
  });
  const instance = Fastify();
  app = instance;
  instance.register(errorHandler);
  instance.get("/whoami", async (req) => authenticate(req));
  const call = (authorization?: string, ip = "10.0.0.1") =>
    instance.inject({
      method: "GET",
      url: "/whoami",
      remoteAddress: ip,
      headers: authorization === undefined ? {} : { authorization },
    });
  return { call, looked };
}

const known = async (key: string) => (key === goodKey ? project : null);

afterEach(async () => {
  await app?.close();
  app = undefined;
});

describe("authenticate", () => {
  it("returns the project of a known key; the scheme is case-insensitive", async () => {
    const { call } = setup(known);
    for (const header of [`Bearer ${goodKey}`, `bearer ${goodKey}`, `  BEARER   ${goodKey} `]) {
      const res = await call(header);
      expect([header, res.statusCode]).toEqual([header, 200]);
      expect(res.json()).toEqual(project);
    }
  });

  it("refuses a request without Authorization as missing_project_key", async () => {
    const { call, looked } = setup(known);
    const res = await call();
    expect(res.statusCode).toBe(401);
    expect(res.headers["www-authenticate"]).toBe("Bearer");
    expect(res.json().error).toBe("missing_project_key");
    expect(looked).toEqual([]);
  });

  it("refuses another scheme, or Bearer with nothing after it, as missing_project_key", async () => {
    const { call, looked } = setup(known);
    for (const header of [`Basic ${goodKey}`, goodKey, "Bearer", "Bearer   "]) {
      const res = await call(header);
      expect([header, res.statusCode, res.json().error]).toEqual([
        header,
        401,
        "missing_project_key",
      ]);
    }
    expect(looked).toEqual([]);
  });

  it("refuses a malformed key as invalid without looking it up, and counts the failure", async () => {
    const { limits, failures } = fakeLimits();
    const { call, looked } = setup(known, limits);
    const typo = goodKey.slice(0, -1) + (goodKey.endsWith("a") ? "b" : "a");
    for (const key of ["short", "has spaces in it, many", typo]) {
      const res = await call(`Bearer ${key}`, "10.0.0.7");
      expect([key, res.statusCode, res.json().error]).toEqual([key, 401, "invalid_project_key"]);
      expect(res.headers["www-authenticate"]).toBe("Bearer");
    }
    expect(looked).toEqual([]);
    expect(Object.fromEntries(failures)).toEqual({ "10.0.0.7": 3 });
  });

  it("refuses a well-formed key that is unknown as invalid, and counts the failure", async () => {
    const { limits, failures } = fakeLimits();
    const { call, looked } = setup(known, limits);
    const unknown = generateKey();
    const imported = "dlm_Zm9vYmFyYmF6cXV4LXJhbmRvbS1ieXRlcw";
    expect((await call(`Bearer ${unknown}`, "10.0.0.8")).json().error).toBe("invalid_project_key");
    expect((await call(`Bearer ${imported}`, "10.0.0.9")).json().error).toBe("invalid_project_key");
    expect(looked).toEqual([unknown, imported]);
    expect(Object.fromEntries(failures)).toEqual({ "10.0.0.8": 1, "10.0.0.9": 1 });
  });

  it("answers 503 unavailable when the key lookup fails, without its internals", async () => {
    const { limits, failures } = fakeLimits();
    const { call } = setup(async () => {
      throw new Error("connect ECONNREFUSED 10.9.9.9:6379");
    }, limits);
    const res = await call(`Bearer ${goodKey}`);
    expect(res.statusCode).toBe(503);
    expect(res.headers["retry-after"]).toBe("1");
    expect(res.json().error).toBe("unavailable");
    expect(res.body).not.toContain("ECONNREFUSED");
    expect(failures.size).toBe(0);
  });

  it("refuses an IP with too many failures before looking at its key", async () => {
    const { limits } = fakeLimits(1);
    const { call, looked } = setup(known, limits);
    await call("Bearer nope-not-a-key-at-all!");
    const res = await call(`Bearer ${goodKey}`);
    expect([res.statusCode, res.json().error]).toEqual([429, "rate_limited"]);
    expect(looked).toEqual([]);
  });

  it("answers a good key the deployment's count refused to send again at once, and refuses the client only on a bad one", async () => {
    const { limits, failures } = fakeLimits();
    // The deployment's count says no to every look-up (other processes' attempts filled it).
    const deploymentFull: AuthDeps["limits"] = {
      ...limits,
      async reserveAuthAttempt(ip) {
        await limits.reserveAuthAttempt(ip, true);
        throw new HttpError("rate_limited", "too many");
      },
    };
    const { call } = setup(known, deploymentFull);
    const good = await call(`Bearer ${goodKey}`, "10.0.0.70");
    // Not served past the limit (that would tell a guesser its guess is good), but not refused
    // for the window either: sent again in a second.
    expect([good.statusCode, good.json().error, good.headers["retry-after"]]).toEqual([
      429,
      "rate_limited",
      "1",
    ]);
    expect(failures.get("10.0.0.70")).toBeUndefined();
    const bad = await call(`Bearer ${generateKey()}`, "10.0.0.70");
    expect([bad.statusCode, bad.json().error]).toEqual([429, "rate_limited"]);
    // The bad key's attempt, and the refusal from now on.
    expect(failures.get("10.0.0.70")).toBe(1 + 100);
  });

  it("looks a key it served again when its cache entry ends without asking the deployment's count, and counts it as a failure once revoked", async () => {
    const { limits, failures } = fakeLimits();
    let shared = 0;
    const counting: AuthDeps["limits"] = {
      ...limits,
      async reserveAuthAttempt(ip, lookUp) {
        if (lookUp) shared += 1;
        await limits.reserveAuthAttempt(ip, lookUp);
      },
    };
    let t = 1_000;
    let revoked = false;
    const cache = createKeyCache(async (key) => (key === goodKey && !revoked ? project : null), {
      ttlMs: 500,
      now: () => t,
    });
    const { call, looked: lookups } = setup(cache, counting);
    // First seen: a guess until the store says otherwise, counted by the deployment.
    expect((await call(`Bearer ${goodKey}`, "10.0.0.80")).statusCode).toBe(200);
    expect(shared).toBe(1);
    // Its entry ended: looked up again, the deployment's count not asked.
    t += 500;
    expect((await call(`Bearer ${goodKey}`, "10.0.0.80")).statusCode).toBe(200);
    expect([lookups.length, shared]).toEqual([2, 1]);
    // Revoked: refused once its entry ends, and the failure counted.
    revoked = true;
    t += 500;
    const res = await call(`Bearer ${goodKey}`, "10.0.0.80");
    expect([res.statusCode, res.json().error]).toEqual([401, "invalid_project_key"]);
    expect(failures.get("10.0.0.80")).toBe(1);
    // A key never served is a guess, as before: the deployment's count asked.
    expect((await call(`Bearer ${generateKey()}`, "10.0.0.80")).statusCode).toBe(401);
    expect(shared).toBe(2);
    expect(failures.get("10.0.0.80")).toBe(2);
  });

  it("with the real in-process failure limiter: only the failing IP is refused", async () => {
    const neverUsed = new Proxy({}, { get: () => expect.unreachable("redis used") }) as Redis;
    const limits = createLimits({
      redis: neverUsed,
      plans: DEFAULT_PLANS,
      authFailuresPerIp: 3,
      authFailureWindowS: 60,
    });
    const { call } = setup(known, limits);
    for (let i = 0; i < 3; i++) {
      expect((await call(`Bearer ${generateKey()}`, "10.0.0.66")).statusCode).toBe(401);
    }
    const refused = await call(`Bearer ${goodKey}`, "10.0.0.66");
    expect(refused.statusCode).toBe(429);
    expect(refused.headers["retry-after"]).toBeDefined();
    expect((await call(`Bearer ${goodKey}`, "10.0.0.67")).statusCode).toBe(200);
  });
});
