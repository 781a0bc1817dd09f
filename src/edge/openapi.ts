import { z } from "zod";
import { ERROR_STATUS } from "../http/errors.js";
import { reportBodySchema } from "../report/report-schema.js";

// OpenAPI 3.1 for the report endpoint, generated from the same zod schemas the edge validates
// with, so the description cannot drift from the code.

const errorBody = z.object({
  error: z.enum(Object.keys(ERROR_STATUS) as [keyof typeof ERROR_STATUS]),
  message: z.string(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  limit: z.number().int().optional(),
  remaining: z.number().int().optional(),
  reset_at: z.string().optional(),
  used: z.number().int().optional(),
});

const json = (schema: z.ZodType, io: "input" | "output" = "output") => ({
  "application/json": {
    schema: z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }),
  },
});

const error = (description: string) => ({ description, content: json(errorBody) });

export function buildOpenApi() {
  return {
    openapi: "3.1.0",
    info: {
      title: "Headroom report endpoint",
      version: "1.0.0",
      description:
        "One report per AI-provider call: the rate-limit and credit figures the provider returned.",
    },
    components: {
      securitySchemes: { projectKey: { type: "http", scheme: "bearer" } },
    },
    security: [{ projectKey: [] }],
    paths: {
      "/api/report": {
        post: {
          operationId: "postReport",
          summary: "Report one AI-provider call",
          requestBody: { required: true, content: json(reportBodySchema, "input") },
          responses: {
            "200": {
              description:
                "Accepted: durably enqueued. `warnings` names the optional values that were unusable (out of range, too long, empty, a timestamp out of its window) and were stored as null or cut; the report itself was kept.",
              content: json(
                z.object({
                  id: z.uuid(),
                  warnings: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
                }),
              ),
            },
            "400": error(
              "invalid_json or invalid_report (the body); invalid_request (two Authorization headers)",
            ),
            "401": error("missing_project_key or invalid_project_key"),
            "403": error("insufficient_scope: a read key (hrr_…) cannot report"),
            "405": error("method_not_allowed"),
            "413": error("payload_too_large"),
            "415": error("unsupported_media_type"),
            "429": error("rate_limited or quota_exceeded"),
            "503": error("unavailable"),
          },
        },
      },
    },
  };
}
