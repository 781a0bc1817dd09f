import { z } from "zod";
import { errorBodySchema } from "../http/errors.js";
import { controlPaths } from "./control/openapi.js";
import { adviceQuery, adviceResponse } from "./schemas/advice.js";
import { alertEventsQuery, alertEventsResponse } from "./schemas/alert-events.js";
import { headroomQuery, headroomResponse } from "./schemas/headroom.js";
import { reportsQuery, reportsResponse } from "./schemas/reports.js";
import { spendQuery, spendResponse } from "./schemas/spend.js";
import { usageQuery, usageResponse } from "./schemas/usage.js";

// OpenAPI 3.1 for the read API, generated from the zod schemas that validate each route's query
// and describe its answer, so the description cannot drift from the code.

const schemaOf = (schema: z.ZodType, io: "input" | "output") =>
  z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }) as {
    properties?: Record<string, unknown>;
  };

function parameters(query: z.ZodObject) {
  const props = schemaOf(query, "input").properties ?? {};
  return Object.entries(props).map(([name, schema]) => ({
    name,
    in: "query",
    required: false,
    schema,
    // Filters and group_by may be repeated; every other parameter is given once.
    ...(["provider", "model", "app", "group_by", "level"].includes(name)
      ? { style: "form", explode: true }
      : {}),
  }));
}

const error = (description: string) => ({
  description,
  content: { "application/json": { schema: schemaOf(errorBodySchema, "output") } },
});

const etag = {
  description: "The answer's tag: strong for JSON as it is, weak (W/) for a compressed copy",
  schema: { type: "string" },
};

// Answers to /usage and /headroom carry an ETag; one the client already holds is answered 304.
const conditional = {
  parameters: [
    {
      name: "If-None-Match",
      in: "header",
      required: false,
      schema: { type: "string" },
      description: "ETags the client holds: 304 when the answer has one of them",
    },
  ],
  notModified: {
    "304": {
      description: "Not Modified: the client's copy is the answer",
      headers: { ETag: etag },
    },
  },
};

function operation(
  operationId: string,
  summary: string,
  query: z.ZodObject,
  response: z.ZodType,
  /** CSV beside JSON; an ETag and 304 for a client holding the answer (tagged). */
  opts: { csv?: boolean; tagged?: boolean } = {},
) {
  const { csv = false, tagged = false } = opts;
  return {
    get: {
      operationId,
      summary,
      parameters: [...parameters(query), ...(tagged ? conditional.parameters : [])],
      responses: {
        "200": {
          description: "OK",
          ...(tagged ? { headers: { ETag: etag } } : {}),
          content: {
            "application/json": { schema: schemaOf(response, "output") },
            ...(csv ? { "text/csv": { schema: { type: "string" } } } : {}),
          },
        },
        ...(tagged ? conditional.notModified : {}),
        "400": error("invalid_query: a parameter is unknown, repeated or out of range"),
        "401": error("missing_project_key or invalid_project_key"),
        "403": error("insufficient_scope: the key is not a read key"),
        "429": error("rate_limited: the key's read limit"),
        "503": error("unavailable"),
      },
    },
  };
}

/** The read API's document; with `control`, the control plane's paths beside (CONTROL_LISTEN=api). */
export function buildApiOpenApi(opts: { control?: boolean } = {}) {
  const doc = readApiOpenApi();
  if (!opts.control) return doc;
  return {
    ...doc,
    info: { ...doc.info, title: "Headroom read API and control plane" },
    paths: { ...doc.paths, ...controlPaths() },
  };
}

/** The control plane's document, on its own listener. */
export function buildControlOpenApi() {
  return {
    openapi: "3.1.0",
    info: {
      title: "Headroom control plane",
      version: "1.0.0",
      description: "Projects, their plans, keys and alert rules, and the audit log.",
    },
    components: { securitySchemes: { managementKey: { type: "http", scheme: "bearer" } } },
    security: [{ managementKey: [] }],
    paths: controlPaths(),
  };
}

function readApiOpenApi() {
  return {
    openapi: "3.1.0",
    info: {
      title: "Headroom read API",
      version: "1.0.0",
      description: "A project's headroom, usage, reports, alert events and spend, for read keys.",
    },
    components: { securitySchemes: { readKey: { type: "http", scheme: "bearer" } } },
    security: [{ readKey: [] }],
    paths: {
      "/api/v1/headroom": operation(
        "getHeadroom",
        "Current headroom per pool and per provider, model and app",
        headroomQuery,
        headroomResponse,
        { tagged: true },
      ),
      "/api/v1/usage": operation(
        "getUsage",
        "Usage per window from the rollups (JSON, or CSV with Accept: text/csv or format=csv)",
        usageQuery,
        usageResponse,
        { csv: true, tagged: true },
      ),
      "/api/v1/reports": operation(
        "listReports",
        "Reports, newest first",
        reportsQuery,
        reportsResponse,
      ),
      "/api/v1/alerts/events": operation(
        "listAlertEvents",
        "Alert events, newest first",
        alertEventsQuery,
        alertEventsResponse,
      ),
      "/api/v1/spend": operation(
        "getSpend",
        "Spend per provider over a range",
        spendQuery,
        spendResponse,
      ),
      "/api/v1/advice": operation(
        "getAdvice",
        "May a call spend this now: go, wait or unknown, by the model's pool (a read key, or the project's report key)",
        adviceQuery,
        adviceResponse,
      ),
    },
  };
}
