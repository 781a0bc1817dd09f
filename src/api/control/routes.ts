import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { AUDIT_ID } from "../../control/audit.js";
import {
  auditQuery,
  createKeyBody,
  createProjectBody,
  parseBody,
  rotateKeyBody,
  ruleBody,
  setPlanBody,
} from "../../control/schemas.js";
import type { Control, Principal } from "../../control/service.js";
import { type AuthFailureLimits, createAuthenticate } from "../../http/authenticate.js";
import { HttpError } from "../../http/errors.js";
import { requireScope } from "../../http/scope.js";
import type { LookupKey } from "../../keys/key-cache.js";
import type { KeyLookup } from "../../keys/key-store.js";
import type { ControlWriteLimits } from "../../limits/control-writes.js";
import { decodeCursor, page } from "../cursor.js";
import type { Answer, Idempotent } from "./idempotency.js";

// The control plane over HTTP (docs/control-plane.md): each route checks its body against the
// schema the OpenAPI document is made from and calls the service (src/control/), which decides
// who may do what and writes the audit log. Management keys only (admin, manage); every POST
// takes an Idempotency-Key; every write (POST, PUT, DELETE) counts against its key's and its
// project's rate (src/limits/control-writes.ts).

export interface ControlRoutesDeps {
  control: Control;
  lookupKey: LookupKey;
  limits: AuthFailureLimits;
  idempotent: Idempotent;
  /** Writes per minute per key and per project (429 past them). */
  writeLimits: ControlWriteLimits;
}

export const MANAGEMENT = ["admin", "manage"] as const;

/** PUT …/limits and …/pools: their largest valid bodies, pretty-printed, are under 128 KiB. */
export const DECLARATIONS_BODY_LIMIT = 256 * 1024;

const principal = (req: FastifyRequest): Principal => ({
  kind: "key",
  key: req.project as KeyLookup,
  source: req.ip,
});

type Params = { project: string; key_id: string; rule_id: string };

const plugin: FastifyPluginAsync<ControlRoutesDeps> = async (app, deps) => {
  const { control } = deps;
  const authenticate = createAuthenticate({
    lookupKey: deps.lookupKey,
    limits: deps.limits,
    keyName: "management key",
  });
  // Every route of this (encapsulated) plugin; the read routes beside it have their own hook.
  app.addHook("onRequest", async (req) => {
    const lookup = await authenticate(req);
    requireScope(lookup, MANAGEMENT);
    req.project = lookup;
    // Every write counts, before its body is read and before its Idempotency-Key is taken.
    if (req.method !== "GET" && req.method !== "HEAD") await deps.writeLimits.take(lookup);
  });

  /** A POST: run once per Idempotency-Key, the answer replayed to retries. */
  async function post(req: FastifyRequest, reply: FastifyReply, run: () => Promise<Answer>) {
    const header = req.headers["idempotency-key"];
    const secret = /^bearer\s+(.+)$/i.exec((req.headers.authorization ?? "").trim())?.[1] ?? "";
    const answer = await deps.idempotent({
      header,
      credentialId: (req.project as KeyLookup).keyId,
      credentialSecret: secret,
      request: { method: req.method, url: req.url, body: req.body },
      run,
    });
    if (answer.replayed) reply.header("idempotent-replayed", "true");
    return reply.code(answer.status).send(answer.body);
  }

  app.post("/api/v1/projects", (req, reply) =>
    post(req, reply, async () => ({
      status: 201,
      body: await control.createProject(principal(req), parseBody(createProjectBody, req.body)),
    })),
  );
  app.get("/api/v1/projects", async (req) => ({
    items: await control.listProjects(principal(req)),
  }));
  app.get<{ Params: Params }>("/api/v1/projects/:project", (req) =>
    control.getProject(principal(req), req.params.project),
  );
  app.put<{ Params: Params }>("/api/v1/projects/:project/plan", (req) =>
    control.setPlan(principal(req), req.params.project, parseBody(setPlanBody, req.body)),
  );

  app.post<{ Params: Params }>("/api/v1/projects/:project/keys", (req, reply) =>
    post(req, reply, async () => ({
      status: 201,
      body: await control.createKey(
        principal(req),
        req.params.project,
        parseBody(createKeyBody, req.body),
      ),
    })),
  );
  app.get<{ Params: Params }>("/api/v1/projects/:project/keys", async (req) => ({
    items: (await control.listKeys(principal(req), req.params.project)).map(
      ({ plan: _plan, ...k }) => k,
    ),
  }));
  app.post<{ Params: Params }>("/api/v1/keys/:key_id/rotate", (req, reply) =>
    post(req, reply, async () => ({
      status: 200,
      body: await control.rotateKey(
        principal(req),
        req.params.key_id,
        parseBody(rotateKeyBody, req.body).expires_in_s,
      ),
    })),
  );
  app.delete<{ Params: Params }>("/api/v1/keys/:key_id", (req) =>
    control.revokeKey(principal(req), req.params.key_id),
  );

  app.get<{ Params: Params }>("/api/v1/projects/:project/alert-rules", async (req) => ({
    items: await control.listRules(principal(req), req.params.project),
  }));
  app.post<{ Params: Params }>("/api/v1/projects/:project/alert-rules", (req, reply) =>
    post(req, reply, async () => ({
      status: 201,
      body: await control.createRule(
        principal(req),
        req.params.project,
        parseBody(ruleBody, req.body),
      ),
    })),
  );
  app.get<{ Params: Params }>("/api/v1/alert-rules/:rule_id", (req) =>
    control.getRule(principal(req), req.params.rule_id),
  );
  app.put<{ Params: Params }>("/api/v1/alert-rules/:rule_id", (req) =>
    control.updateRule(principal(req), req.params.rule_id, parseBody(ruleBody, req.body)),
  );
  app.delete<{ Params: Params }>("/api/v1/alert-rules/:rule_id", (req) =>
    control.removeRule(principal(req), req.params.rule_id),
  );
  app.post<{ Params: Params }>("/api/v1/alert-rules/:rule_id/test", (req, reply) =>
    post(req, reply, async () => ({
      status: 200,
      body: await control.testRule(principal(req), req.params.rule_id),
    })),
  );

  // A project's declarations, replaced whole; the service checks the body (for the CLI too).
  // Their largest valid bodies (200 limits, 1,000 pooled apps) are over BODY_LIMIT_BYTES' default.
  const declared = { bodyLimit: DECLARATIONS_BODY_LIMIT };
  app.get<{ Params: Params }>("/api/v1/projects/:project/limits", (req) =>
    control.getLimits(principal(req), req.params.project),
  );
  app.put<{ Params: Params }>("/api/v1/projects/:project/limits", declared, (req) =>
    control.setLimits(principal(req), req.params.project, req.body ?? {}),
  );
  app.get<{ Params: Params }>("/api/v1/projects/:project/pools", (req) =>
    control.getPools(principal(req), req.params.project),
  );
  app.put<{ Params: Params }>("/api/v1/projects/:project/pools", declared, (req) =>
    control.setPools(principal(req), req.params.project, req.body ?? {}),
  );

  app.get("/api/v1/audit", async (req) => {
    const parsed = auditQuery.safeParse(req.query);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new HttpError("invalid_query", `${issue?.path.join(".")}: ${issue?.message}`);
    }
    const q = parsed.data;
    const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor, AUDIT_ID);
    const rows = await control.readAudit(principal(req), {
      project: q.project,
      limit: q.limit,
      after,
    });
    const { items, next_cursor } = page(rows, q.limit, (r) => ({ t: r.t, id: r.entry.id }));
    return { items: items.map((r) => r.entry), next_cursor };
  });
};

/** The control plane's routes, behind management keys: register it in a scope of its own. */
export const controlRoutes = plugin;
