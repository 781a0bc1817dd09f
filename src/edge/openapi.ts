import { z } from "zod";
import { errorBodySchema } from "../http/errors.js";
import { UUID_TEXT } from "../report/report-id.js";
import { reportBodySchema } from "../report/report-schema.js";

// OpenAPI 3.1 for the report endpoints, generated from the same zod schemas the edge validates
// with, so the description cannot drift from the code.

const json = (schema: z.ZodType, io: "input" | "output" = "output") => ({
  "application/json": {
    schema: z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }),
  },
});

const error = (description: string) => ({ description, content: json(errorBodySchema) });

const issue = z.object({ path: z.string(), message: z.string() });

/** One item of a batch: the report, with the client's optional id. */
/** A client's id: any UUID as text, as the edge takes it (its version bits unchecked). */
const clientId = z.string().regex(UUID_TEXT);

const batchItem = reportBodySchema.extend({
  id: clientId
    .nullable()
    .optional()
    .describe("The client's id: the same project and id within 24 h is stored once"),
});

const batchResults = z.object({
  results: z.array(
    z.union([
      z.object({
        id: clientId,
        warnings: z.array(issue).optional(),
        duplicate: z
          .literal(true)
          .optional()
          .describe("This id was stored already (within 24 h): nothing more was stored"),
      }),
      errorBodySchema,
    ]),
  ),
});

const batchRequest = {
  "application/json": {
    schema: z.toJSONSchema(z.array(batchItem), {
      io: "input",
      unrepresentable: "any",
      target: "draft-2020-12",
    }),
  },
  "application/x-ndjson": {
    schema: {
      type: "string",
      description: "One report (as an item of the JSON array) per line",
    },
  },
};

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
      "/api/reports": {
        post: {
          operationId: "postReports",
          summary: "Report many AI-provider calls at once (up to BATCH_MAX_REPORTS)",
          requestBody: { required: true, content: batchRequest },
          responses: {
            "200": {
              description:
                "Every item was taken (or was a duplicate): one result per item, in order.",
              content: json(batchResults),
            },
            "207": {
              description:
                "Some items were not taken: each result is the item's id or its error, as a single report's (invalid_report, invalid_json for an NDJSON line, rate_limited and quota_exceeded for the reports past what the limits took, unavailable to send again). The limits' headers are on the response.",
              content: json(batchResults),
            },
            "400": error(
              "invalid_json or invalid_report: the envelope is not JSON or not an array",
            ),
            "401": error("missing_project_key or invalid_project_key"),
            "405": error("method_not_allowed"),
            "413": error("payload_too_large: over BATCH_LIMIT_BYTES or BATCH_MAX_REPORTS"),
            "415": error("unsupported_media_type"),
            "429": error("rate_limited or quota_exceeded: none of the reports could be taken"),
            "503": error("unavailable"),
          },
        },
      },
      "/v1/traces": {
        post: {
          operationId: "postOtlpTraces",
          summary:
            "An OTLP/HTTP trace export (docs/opentelemetry.md): its calls to AI providers become reports",
          requestBody: {
            required: true,
            description:
              "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest, binary or in the OTLP JSON mapping; Content-Encoding gzip or none.",
            content: {
              "application/x-protobuf": { schema: { type: "string", format: "binary" } },
              "application/json": { schema: { type: "object" } },
            },
          },
          responses: {
            "200": {
              description:
                "ExportTraceServiceResponse in the request's encoding; partial_success counts the provider spans refused for good.",
            },
            "400": { description: "google.rpc.Status: the body does not decode" },
            "401": { description: "google.rpc.Status: no key, or an unknown one" },
            "403": { description: "google.rpc.Status: a read key cannot report" },
            "413": { description: "google.rpc.Status: over OTLP_LIMIT_BYTES, as sent or unzipped" },
            "415": error("unsupported_media_type: another content type or content encoding"),
            "429": {
              description:
                "google.rpc.Status, Retry-After: the burst limit or quota refused a span; send the export again",
            },
            "503": { description: "google.rpc.Status, Retry-After: send the export again" },
          },
        },
      },
    },
  };
}
