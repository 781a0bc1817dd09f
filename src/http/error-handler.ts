import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { EnqueueError } from "../queue/enqueue-error.js";
import { HttpError, unavailable } from "./errors.js";
import { redactPath } from "./request-log.js";

// The one error handler: every error becomes one of the contract's codes and bodies; anything
// unexpected is a 500 whose body carries no internals (the log has them).

export interface ErrorHandlerOptions {
  /** Counts 503s by reason (the edge's headroom_unavailable_total). */
  unavailable?: { inc(labels: { reason: string }): void };
}

export const errorHandler = fp<ErrorHandlerOptions>(
  async (app, opts) => {
    app.setErrorHandler((err, req, reply) => {
      const httpError = toHttpError(err, req);
      if (keepsConnection(err, httpError, req)) reply.removeHeader("connection");
      if (httpError.extra.reason) opts.unavailable?.inc({ reason: httpError.extra.reason });
      return sendError(req, reply, httpError);
    });
    // The path is echoed to help whoever mistyped it, but never a key sent in it by mistake.
    app.setNotFoundHandler((req, reply) =>
      sendError(
        req,
        reply,
        new HttpError("not_found", `no route for ${req.method} ${redactPath(req.url)}`),
      ),
    );
  },
  { name: "error-handler" },
);

function sendError(req: FastifyRequest, reply: FastifyReply, err: HttpError) {
  if (err.status >= 500) {
    req.log.error({ code: err.code, reason: err.extra.reason, err: err.cause }, err.message);
  }
  for (const [name, value] of Object.entries(err.extra.headers ?? {})) reply.header(name, value);
  return reply.code(err.status).send(err.toBody());
}

/**
 * Fastify answers every body-parser error with `Connection: close`, as it cannot tell whether the
 * body was read to its end. Node can: once the whole message is read the framing is intact, and
 * a body refused for its content is no reason to drop the requests pipelined behind it. A 5xx
 * (the edge shutting down) still closes, as does a body refused before it was all read.
 */
export function keepsConnection(err: unknown, httpError: HttpError, req: FastifyRequest): boolean {
  return (
    httpError.status < 500 &&
    req.raw.complete &&
    (err as { code?: string }).code !== "FST_ERR_CTP_INVALID_CONTENT_LENGTH"
  );
}

/** Our own and Fastify's errors mapped onto the contract's codes; anything else is a bug. */
export function toHttpError(err: unknown, req: FastifyRequest): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof EnqueueError) {
    return err.mayBeStored
      ? unavailable(
          "the report may have been stored: Redis took it but did not confirm it in time; " +
            "sending it again may count it twice",
          "unconfirmed",
        )
      : unavailable("the queue cannot take reports right now", "enqueue");
  }
  // `throw null` (or a rejection with undefined) must become a 500 too, not crash this handler.
  const fields = (err ?? {}) as { code?: string; statusCode?: number };
  const code = fields.code;
  switch (code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new HttpError("payload_too_large", "the body is over the size limit");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_CTP_INVALID_TYPE":
      return new HttpError("unsupported_media_type", "send Content-Type: application/json");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new HttpError("invalid_json", "the body is empty");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new HttpError("invalid_json", "the body does not match its Content-Length");
    case "ECONNRESET":
    case "FST_ERR_REQ_ABORTED":
      return new HttpError("invalid_json", "the request was aborted");
  }
  const status = fields.statusCode;
  if (status === 408) return new HttpError("request_timeout", "the request took too long");
  if (status === 400) return new HttpError("invalid_json", "the request could not be read");
  const internal = new HttpError("internal", "internal error");
  internal.cause = err;
  req.log.error({ err }, "unhandled error");
  return internal;
}
