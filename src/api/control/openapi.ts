import { z } from "zod";
import {
  auditPage,
  auditQuery,
  createdKey,
  createdRule,
  createKeyBody,
  createProjectBody,
  declaredLimitsBody,
  declaredLimitsView,
  declaredPoolsBody,
  declaredPoolsView,
  keyList,
  projectList,
  projectView,
  removedRule,
  revokedKey,
  rotatedKey,
  rotateKeyBody,
  ruleBody,
  ruleList,
  ruleView,
  setPlanBody,
  testSent,
} from "../../control/schemas.js";
import { errorBodySchema } from "../../http/errors.js";

// OpenAPI 3.1 paths of the control plane, generated from the zod schemas that validate each
// route's body and describe its answer (src/control/schemas.ts).

const schemaOf = (schema: z.ZodType, io: "input" | "output") =>
  z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" });

const error = (description: string) => ({
  description,
  content: { "application/json": { schema: schemaOf(errorBodySchema, "output") } },
});

const pathParam = (name: string) => ({
  name,
  in: "path",
  required: true,
  schema: { type: "string" },
});

const idempotencyKey = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  schema: { type: "string", minLength: 1, maxLength: 255 },
  description:
    "The same key and body within 24 h replays the first answer (Idempotent-Replayed: true); " +
    "the same key with another body is a 422 idempotency_key_reused",
};

interface Op {
  id: string;
  summary: string;
  who: string;
  params?: string[];
  body?: z.ZodType;
  query?: z.ZodObject;
  status?: number;
  answer: z.ZodType;
  post?: boolean;
}

function op(o: Op) {
  const query = o.query
    ? Object.entries(
        (schemaOf(o.query, "input") as { properties?: Record<string, unknown> }).properties ?? {},
      ).map(([name, schema]) => ({ name, in: "query", required: false, schema }))
    : [];
  return {
    operationId: o.id,
    summary: o.summary,
    description: `Who may: ${o.who}.`,
    parameters: [...(o.params ?? []).map(pathParam), ...query, ...(o.post ? [idempotencyKey] : [])],
    ...(o.body
      ? {
          requestBody: {
            required: false,
            content: { "application/json": { schema: schemaOf(o.body, "input") } },
          },
        }
      : {}),
    responses: {
      [String(o.status ?? 200)]: {
        description: "OK",
        ...(o.post
          ? {
              headers: {
                "Idempotent-Replayed": {
                  description:
                    "true when this is the first answer to the Idempotency-Key, replayed",
                  schema: { type: "string" },
                },
              },
            }
          : {}),
        content: { "application/json": { schema: schemaOf(o.answer, "output") } },
      },
      "400": error("invalid_body or invalid_query"),
      "401": error("missing_project_key or invalid_project_key"),
      "403": error("insufficient_scope: not a management key, or not one that may do this"),
      "404": error("not_found: no such project, key or rule (or not one this key manages)"),
      ...(o.post
        ? {
            "409": error(
              "conflict (exists, revoked, or the project is at its plan's cap: `limit`), or idempotency_in_progress",
            ),
            "422": error("idempotency_key_reused"),
          }
        : {}),
      "429": error(
        "rate_limited: too many failed authentications, or a write past its key's or project's writes a minute (Retry-After)",
      ),
      "503": error("unavailable"),
    },
  };
}

const ADMIN = "admin keys";
const MANAGE = "admin keys, and manage keys of the project";

export function controlPaths() {
  return {
    "/api/v1/projects": {
      post: op({
        id: "createProject",
        summary: "Create a project on a plan",
        who: ADMIN,
        body: createProjectBody,
        status: 201,
        answer: projectView,
        post: true,
      }),
      get: op({
        id: "listProjects",
        summary: "Projects (a manage key: its own)",
        who: "admin and manage keys",
        answer: projectList,
      }),
    },
    "/api/v1/projects/{project}": {
      get: op({
        id: "getProject",
        summary: "A project and its plan",
        who: MANAGE,
        params: ["project"],
        answer: projectView,
      }),
    },
    "/api/v1/projects/{project}/plan": {
      put: op({
        id: "setPlan",
        summary: "Put a project on a plan; another plan resets the overrides not given",
        who: ADMIN,
        params: ["project"],
        body: setPlanBody,
        answer: projectView,
      }),
    },
    "/api/v1/projects/{project}/keys": {
      post: op({
        id: "createKey",
        summary: "Create a key (report, read or manage); its secret is in this answer only",
        who: MANAGE,
        params: ["project"],
        body: createKeyBody,
        status: 201,
        answer: createdKey,
        post: true,
      }),
      get: op({
        id: "listKeys",
        summary: "A project's keys: ids, scopes, prefixes, times, revoked",
        who: MANAGE,
        params: ["project"],
        answer: keyList,
      }),
    },
    "/api/v1/keys/{key_id}/rotate": {
      post: op({
        id: "rotateKey",
        summary: "A new secret for the key; the old one works until expires_in_s",
        who: MANAGE,
        params: ["key_id"],
        body: rotateKeyBody,
        answer: rotatedKey,
        post: true,
      }),
    },
    "/api/v1/keys/{key_id}": {
      delete: op({
        id: "revokeKey",
        summary: "Revoke a key (every secret it has had), everywhere within KEY_CACHE_TTL_MS",
        who: MANAGE,
        params: ["key_id"],
        answer: revokedKey,
      }),
    },
    "/api/v1/projects/{project}/alert-rules": {
      get: op({
        id: "listAlertRules",
        summary: "A project's alert rules",
        who: MANAGE,
        params: ["project"],
        answer: ruleList,
      }),
      post: op({
        id: "createAlertRule",
        summary: "Create an alert rule; its signing secret is in this answer only",
        who: MANAGE,
        params: ["project"],
        body: ruleBody,
        status: 201,
        answer: createdRule,
        post: true,
      }),
    },
    "/api/v1/alert-rules/{rule_id}": {
      get: op({
        id: "getAlertRule",
        summary: "An alert rule",
        who: MANAGE,
        params: ["rule_id"],
        answer: ruleView,
      }),
      put: op({
        id: "updateAlertRule",
        summary: "Replace an alert rule's fields (its id, project and secret stay)",
        who: MANAGE,
        params: ["rule_id"],
        body: ruleBody,
        answer: ruleView,
      }),
      delete: op({
        id: "deleteAlertRule",
        summary: "Remove an alert rule",
        who: MANAGE,
        params: ["rule_id"],
        answer: removedRule,
      }),
    },
    "/api/v1/alert-rules/{rule_id}/test": {
      post: op({
        id: "testAlertRule",
        summary: "Send a signed test event to the rule's webhook",
        who: MANAGE,
        params: ["rule_id"],
        answer: testSent,
        post: true,
      }),
    },
    "/api/v1/projects/{project}/limits": {
      get: op({
        id: "getDeclaredLimits",
        summary: "The limits the project declares for providers that state none",
        who: MANAGE,
        params: ["project"],
        answer: declaredLimitsView,
      }),
      put: op({
        id: "setDeclaredLimits",
        summary:
          "Replace the project's declared limits (at most 200; one per provider, model, pool, dimension and window)",
        who: MANAGE,
        params: ["project"],
        body: declaredLimitsBody,
        answer: declaredLimitsView,
      }),
    },
    "/api/v1/projects/{project}/pools": {
      get: op({
        id: "getDeclaredPools",
        summary: "The pools the project declares: the apps that share a provider's limit",
        who: MANAGE,
        params: ["project"],
        answer: declaredPoolsView,
      }),
      put: op({
        id: "setDeclaredPools",
        summary:
          "Replace the project's declared pools (at most 100, 1,000 apps in all; an app in one pool of a provider)",
        who: MANAGE,
        params: ["project"],
        body: declaredPoolsBody,
        answer: declaredPoolsView,
      }),
    },
    "/api/v1/audit": {
      get: op({
        id: "listAudit",
        summary:
          "The audit log, newest first (admin: every project, or `project`; manage: its own)",
        who: "admin and manage keys",
        query: auditQuery,
        answer: auditPage,
      }),
    },
  };
}
