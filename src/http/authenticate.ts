import type { FastifyRequest } from "fastify";
import type { LookupKey } from "../keys/key-cache.js";
import { isWellFormedKey } from "../keys/key-format.js";
import type { KeyLookup } from "../keys/key-store.js";
import { HttpError, unavailable } from "./errors.js";

// Who is sending: the project key of `Authorization: Bearer <key>`, checked before the body is
// read. Malformed keys are refused without a Redis call; every failure counts against the
// client's IP, and an attempt that needs a look-up takes its failure before the look-up (given
// back if the key is good), so that guesses sent at once cannot outrun the limit.

/** Failed authentication counted per client IP (the edge's limits.ts provides it). */
declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated key: its project, plan and scope. */
    project?: KeyLookup;
  }
}

/** Refusals are thrown, or rejected when a limiter needs to wait for its answer. */
export interface AuthFailureLimits {
  checkAuthFailures(ip: string): void | Promise<void>;
  recordAuthFailure(ip: string): void;
  /**
   * Takes one failure ahead of the answer. `lookUp`: the attempt needs a key look-up, so it is
   * also counted with the deployment's other processes (which may take a moment to answer).
   */
  reserveAuthAttempt(ip: string, lookUp: boolean): void | Promise<void>;
  releaseAuthAttempt(ip: string): void;
  /**
   * The deployment's count refused `ip` and its key was bad: this process refuses the client
   * from now on too (without a look-up), until its window ends.
   */
  refuseClient(ip: string): void;
}

export interface AuthDeps {
  lookupKey: LookupKey;
  limits: AuthFailureLimits;
  /** The key the 401 messages ask for ("read key" on the read API); the codes stay the contract's. */
  keyName?: string;
}

// Anything after "Bearer " is the presented key: a malformed one is invalid, not missing.
const BEARER = /^bearer\s+(.+)$/i;

/** 401 bodies carry `WWW-Authenticate: Bearer`, as RFC 6750 asks. */
const unauthorized = (code: "missing_project_key" | "invalid_project_key", message: string) =>
  new HttpError(code, message, { headers: { "www-authenticate": "Bearer" } });

/**
 * Node keeps the first of two Authorization headers and drops the other, so only the raw header
 * list shows a second one. No allocation unless a name has the right length.
 */
export function repeatsAuthorization(rawHeaders: string[]): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (
      name.length === 13 &&
      (name === "Authorization" ||
        name === "authorization" ||
        name.toLowerCase() === "authorization") &&
      ++seen > 1
    )
      return true;
  }
  return false;
}

export function createAuthenticate({ lookupKey, limits, keyName = "project key" }: AuthDeps) {
  const invalid = () => unauthorized("invalid_project_key", `the ${keyName} is not valid`);
  const busy = () =>
    new HttpError(
      "rate_limited",
      "too many keys from this client were being checked at once: send again",
      { headers: { "retry-after": 1 } },
    );

  // Look-ups in flight, by IP and key: concurrent requests from one client with one key share
  // one look-up and one reserved attempt, so a burst of good requests on a cold cache is not
  // mistaken for guessing.
  const inFlight = new Map<string, Promise<KeyLookup | null>>();

  async function reserveAndLookUp(ip: string, key: string): Promise<KeyLookup | null> {
    // Thrown at once when this process already refuses the client: no look-up then.
    const reserved = limits.reserveAuthAttempt(ip, true);
    // The count of other processes is asked beside the look-up, not before it: a slow or absent
    // Redis delays a good key by no more than the longer of the two.
    const [counted, found] = await Promise.allSettled([reserved, lookupKey(key)]);
    if (found.status === "rejected") {
      limits.releaseAuthAttempt(ip);
      throw unavailable("the service cannot check keys right now", "key_store");
    }
    // A good key gives its attempt back. When the deployment's count refused it, the answer is
    // still a 429 (serving it would tell a guesser past the limit that its guess is good), but one
    // to send again at once, and the client is not refused from now on: that count holds the
    // look-ups in flight too, and one client's many good keys looked up at once (edges restarted,
    // caches cold) are not guesses. The key is known now: sent again, it is served from the cache.
    if (found.value) {
      limits.releaseAuthAttempt(ip);
      if (counted.status === "rejected") throw busy();
      return found.value;
    }
    // A bad one keeps it: that is the failure. Past the deployment's limit, the client is refused
    // here from now on.
    if (counted.status === "rejected") {
      limits.refuseClient(ip);
      throw counted.reason;
    }
    return null;
  }

  /** A failure counted against `ip` before the answer: the 401 (or the limit's 429). */
  function refuse(ip: string): never | Promise<never> {
    // Refused without a look-up, and without asking other processes: the key cannot be good.
    const reserved = limits.reserveAuthAttempt(ip, false);
    if (reserved) {
      return reserved.then(() => {
        throw invalid();
      });
    }
    throw invalid();
  }

  /**
   * A key this process found good before, looked up again when its cache entry ends (every
   * KEY_CACHE_TTL_MS a key is used): no guess, so the deployment's count is not asked first (two
   * Redis commands per look-up), as it is not for a key the cache still holds. This process's
   * count already let the client in (checkAuthFailures); a key gone bad since is a failure
   * counted in both, as any other.
   */
  async function lookUpAgain(ip: string, key: string): Promise<KeyLookup | null> {
    let found: KeyLookup | null;
    try {
      found = await lookupKey(key);
    } catch {
      throw unavailable("the service cannot check keys right now", "key_store");
    }
    if (!found) limits.recordAuthFailure(ip);
    return found;
  }

  async function lookUp(ip: string, key: string, again: boolean): Promise<KeyLookup> {
    const id = `${ip} ${key}`;
    const shared = inFlight.get(id);
    if (shared) {
      const project = await shared;
      if (project) return project;
      limits.recordAuthFailure(ip);
      throw invalid();
    }
    const own = again ? lookUpAgain(ip, key) : reserveAndLookUp(ip, key);
    inFlight.set(id, own);
    const done = () => inFlight.delete(id);
    own.then(done, done);
    const project = await own;
    if (!project) throw invalid();
    return project;
  }

  function identify(
    req: FastifyRequest,
    header: string | undefined,
  ): KeyLookup | Promise<KeyLookup> {
    if (!header)
      throw unauthorized("missing_project_key", `send Authorization: Bearer <${keyName}>`);
    const key = BEARER.exec(header.trim())?.[1];
    if (!key)
      throw unauthorized(
        "missing_project_key",
        "the Authorization header must use the Bearer scheme",
      );
    // A key the cache holds was well-formed when it was looked up.
    const known = lookupKey.peek?.(key);
    if (known) return known;
    // No look-up, but a failure all the same, counted before the answer.
    if (!isWellFormedKey(key)) return refuse(req.ip);
    // A key the cache knows to be bad: a failure, without a look-up.
    if (known === null) return refuse(req.ip);
    return lookUp(req.ip, key, lookupKey.servedBefore?.(key) === true);
  }

  /**
   * The request's key, at once when the cache knows it; a promise when it must be looked up.
   * Refusals are thrown, or rejected.
   */
  return function authenticate(req: FastifyRequest): KeyLookup | Promise<KeyLookup> {
    const header = req.headers.authorization;
    // A credential sent twice is ambiguous: which one was meant is not ours to guess.
    if (header !== undefined && repeatsAuthorization(req.raw.rawHeaders)) {
      throw new HttpError("invalid_request", "send one Authorization header, not several", {
        headers: { "www-authenticate": 'Bearer error="invalid_request"' },
      });
    }
    const checked = limits.checkAuthFailures(req.ip);
    if (checked) return checked.then(() => identify(req, header));
    return identify(req, header);
  };
}
