import type { FastifyRequest } from "fastify";
import { isWellFormedKey } from "../keys/key-format.js";
import type { KeyLookup } from "../keys/key-store.js";
import { HttpError, unavailable } from "./errors.js";
import type { Limits } from "./limits.js";

// Who is sending: the project key of `Authorization: Bearer <key>`, checked before the body is
// read. Malformed keys are refused without a Redis call; every failure counts against the
// client's IP.

export interface AuthDeps {
  lookupKey: (key: string) => Promise<KeyLookup | null>;
  limits: Pick<Limits, "checkAuthFailures" | "recordAuthFailure">;
}

// Anything after "Bearer " is the presented key: a malformed one is invalid, not missing.
const BEARER = /^bearer\s+(.+)$/i;

/** 401 bodies carry `WWW-Authenticate: Bearer`, as RFC 6750 asks. */
const unauthorized = (code: "missing_project_key" | "invalid_project_key", message: string) =>
  new HttpError(code, message, { headers: { "www-authenticate": "Bearer" } });

export function createAuthenticate({ lookupKey, limits }: AuthDeps) {
  const invalid = (ip: string) => {
    limits.recordAuthFailure(ip);
    return unauthorized("invalid_project_key", "the project key is not valid");
  };

  return async function authenticate(req: FastifyRequest): Promise<KeyLookup> {
    await limits.checkAuthFailures(req.ip);
    const header = req.headers.authorization;
    if (!header)
      throw unauthorized("missing_project_key", "send Authorization: Bearer <project key>");
    const key = BEARER.exec(header.trim())?.[1];
    if (!key)
      throw unauthorized(
        "missing_project_key",
        "the Authorization header must use the Bearer scheme",
      );
    if (!isWellFormedKey(key)) throw invalid(req.ip);
    let project: KeyLookup | null;
    try {
      project = await lookupKey(key);
    } catch {
      throw unavailable("the service cannot check keys right now");
    }
    if (!project) throw invalid(req.ip);
    return project;
  };
}
