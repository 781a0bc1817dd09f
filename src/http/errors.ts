import { z } from "zod";

// The closed set of error codes of the report API (docs/report-api.md), one error type, and the body every error shares.

export const ERROR_STATUS = {
  invalid_json: 400,
  invalid_report: 400,
  // RFC 6750's code for a request that "repeats the same parameter": two Authorization headers.
  invalid_request: 400,
  /** A read API query parameter that is unknown, repeated or out of range. */
  invalid_query: 400,
  /** A control plane request body that does not match its schema (or names an unknown plan). */
  invalid_body: 400,
  missing_project_key: 401,
  invalid_project_key: 401,
  /** A key used outside its scope (a read key on /api/report, a report key on the read API, a
   * management key on either, a data key on the control plane). */
  insufficient_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  /** The control plane's: what is to be created exists (a project), or cannot change (revoked). */
  conflict: 409,
  /** An Idempotency-Key whose first request is still being answered. */
  idempotency_in_progress: 409,
  request_timeout: 408,
  payload_too_large: 413,
  headers_too_large: 431,
  unsupported_media_type: 415,
  /** An Idempotency-Key sent again with another body (or another method or path). */
  idempotency_key_reused: 422,
  rate_limited: 429,
  quota_exceeded: 429,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

const issueSchema = z.object({ path: z.string(), message: z.string() });

export type Issue = z.infer<typeof issueSchema>;

/** What a 429 adds to the body: the limit, what is left of it, when it resets (and a quota's use). */
const limitFields = z.object({
  limit: z.number().int().optional(),
  remaining: z.number().int().optional(),
  reset_at: z.string().optional().describe("When the limit resets (ISO 8601, UTC)"),
  used: z.number().int().optional().describe("The month's reports counted (quota_exceeded)"),
});

export type LimitFields = z.infer<typeof limitFields>;

/**
 * The body of every error answer, on the edge and the read API: the one schema both OpenAPI
 * documents describe it with, and the type HttpError's body is checked against.
 */
export const errorBodySchema = z
  .object({
    error: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    issues: z.array(issueSchema).optional(),
  })
  .extend(limitFields.shape);

export type ErrorBody = z.infer<typeof errorBodySchema>;

export class HttpError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: {
      body?: LimitFields;
      headers?: Record<string, string | number>;
      issues?: Issue[];
      /** Why a 503 was answered, for its log line and `headroom_unavailable_total`. */
      reason?: UnavailableReason;
    } = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }

  toBody(): ErrorBody {
    return {
      error: this.code,
      message: this.message,
      ...(this.extra.issues ? { issues: this.extra.issues } : {}),
      ...this.extra.body,
    };
  }
}

/** Why the edge answered 503: a closed set, a label of `headroom_unavailable_total`. */
export type UnavailableReason =
  | "redis"
  | "backlog"
  | "redis_memory"
  | "enqueue"
  /** Redis took the job but did not confirm it (to its replicas) in time: it may be stored. */
  | "unconfirmed"
  | "key_store"
  /** The edge holds as many request bodies as EDGE_MAX_BYTES_IN_FLIGHT allows. */
  | "in_flight"
  | "shutting_down";

/** 503: the report cannot be taken durably now (Redis down, backlog over its bound, shutting down). */
export const unavailable = (
  message = "the service cannot take reports right now",
  reason: UnavailableReason = "redis",
) => new HttpError("unavailable", message, { headers: { "retry-after": 1 }, reason });
