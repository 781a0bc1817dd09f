import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { type FastifyBaseLogger, LogController } from "fastify";
import type { Config } from "../config.js";
import { HttpError } from "./errors.js";
import { whenAnswered } from "./in-flight.js";
import { serializeRequest } from "./request-log.js";
import { lazyRequestLogger } from "./request-logger.js";

// How the edge's HTTP server is set up: timeouts, body limit, logging, and the answer to requests
// Node refuses before Fastify sees them.

export type ServerConfig = Pick<
  Config,
  | "BODY_LIMIT_BYTES"
  | "LOG_REQUESTS"
  | "TRUST_PROXY"
  | "REQUEST_TIMEOUT_MS"
  | "HEADERS_TIMEOUT_MS"
  | "KEEP_ALIVE_TIMEOUT_MS"
>;

export function serverOptions(config: ServerConfig, logger: FastifyBaseLogger) {
  return {
    // Logged requests carry their URL with any key-shaped part redacted (request-log.ts). Set
    // once here, so request loggers inherit it at no cost per request.
    loggerInstance: logger.child({}, { serializers: { req: serializeRequest } }),
    logController: new LogController({ disableRequestLogging: !config.LOG_REQUESTS }),
    childLoggerFactory: lazyRequestLogger,
    requestIdHeader: "x-request-id",
    trustProxy: trustProxyOf(config.TRUST_PROXY),
    bodyLimit: config.BODY_LIMIT_BYTES,
    requestTimeout: config.REQUEST_TIMEOUT_MS,
    // Node enforces the two timeouts above only when it sweeps its connections, every 30 s by
    // default, and a socket idle for connectionTimeout is dropped without an answer. So: sweep
    // often, and keep the idle cut-off behind the 408 as a backstop.
    connectionTimeout: config.REQUEST_TIMEOUT_MS * 2,
    keepAliveTimeout: config.KEEP_ALIVE_TIMEOUT_MS,
    http: {
      headersTimeout: config.HEADERS_TIMEOUT_MS,
      connectionsCheckingInterval: sweepInterval(config),
    },
    // Requests Node refuses before Fastify sees them (timeouts, malformed HTTP, huge headers)
    // get the contract's body too.
    clientErrorHandler,
    // Fastify's own 503 while closing has a body of its own; ours follows the contract.
    return503OnClosing: false,
  };
}

/**
 * Fastify's trustProxy for TRUST_PROXY: a hop count trusts that many addresses from the socket's
 * end of X-Forwarded-For (Fastify reads a bare number as "trust none"); a list, those proxies.
 */
export function trustProxyOf(
  setting: Config["TRUST_PROXY"],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof setting === "number") return setting === 0 ? false : (_, hop) => hop < setting;
  return setting;
}

/** How often Node checks for requests over their time: a quarter of the shorter timeout, ≤ 1 s. */
export function sweepInterval(config: Pick<Config, "REQUEST_TIMEOUT_MS" | "HEADERS_TIMEOUT_MS">) {
  const shorter = Math.min(config.REQUEST_TIMEOUT_MS, config.HEADERS_TIMEOUT_MS);
  return Math.max(25, Math.min(1_000, Math.floor(shorter / 4)));
}

function clientErrorHandler(err: Error & { code?: string }, socket: Duplex) {
  // A reset connection has nobody left to answer.
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  // Node reads no more from this connection. Requests read before the fault are answered first,
  // in order, as pipelining wants; then the refusal, and the connection closes.
  whenAnswered(socket, () => refuse(err, socket));
}

function refuse(err: Error & { code?: string }, socket: Duplex) {
  if (socket.destroyed) return;
  // Data after a request that closed the connection (HTTP/1.0, `Connection: close`) is ignored.
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const error =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? new HttpError("request_timeout", "the request took too long")
      : err.code === "HPE_HEADER_OVERFLOW"
        ? new HttpError("headers_too_large", "the request headers are too large")
        : new HttpError("invalid_json", "the request could not be read");
  const body = JSON.stringify(error.toBody());
  socket.write(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  socket.destroy();
}
