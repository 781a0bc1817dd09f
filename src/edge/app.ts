import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from "fastify";
import type { Config } from "../config.js";
import { isWellFormedKey } from "../keys/key-format.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { Enqueuer } from "../queue/enqueuer.js";
import { toRow } from "../report/report-schema.js";
import { uuidv7 } from "../lib/uuidv7.js";
import type { BacklogGate } from "./backlog.js";
import { HttpError } from "./errors.js";
import type { Limits } from "./limits.js";
import type { EdgeMetrics } from "./metrics.js";
import { registerMetricsRoute } from "./metrics-route.js";
import { parseJsonBody, validateReport } from "./parse-report.js";
import { buildOpenApi } from "./openapi.js";

export interface EdgeDeps {
  config: Pick<
    Config,
    | "BODY_LIMIT_BYTES"
    | "LOG_REQUESTS"
    | "TRUST_PROXY"
    | "REQUEST_TIMEOUT_MS"
    | "HEADERS_TIMEOUT_MS"
    | "KEEP_ALIVE_TIMEOUT_MS"
    | "METRICS_TOKEN"
    | "METRICS_PORT"
  >;
  logger: FastifyBaseLogger;
  lookupKey: (key: string) => Promise<KeyLookup | null>;
  limits: Limits;
  backlog: BacklogGate;
  enqueuer: Enqueuer;
  metrics: EdgeMetrics;
}

declare module "fastify" {
  interface FastifyRequest {
    project?: KeyLookup;
  }
}

// Anything after "Bearer " is the presented key: a malformed one is invalid, not missing.
const BEARER = /^bearer\s+(.+)$/i;
const REPORT_PATH = "/api/report";

/** 401 bodies carry `WWW-Authenticate: Bearer`, as RFC 6750 asks. */
const unauthorized = (code: "missing_project_key" | "invalid_project_key", message: string) =>
  new HttpError(code, message, { headers: { "www-authenticate": "Bearer" } });

export function buildApp(deps: EdgeDeps): FastifyInstance {
  const { config, limits, backlog, enqueuer, metrics } = deps;
  const app = Fastify({
    loggerInstance: deps.logger,
    logController: new LogController({ disableRequestLogging: !config.LOG_REQUESTS }),
    requestIdHeader: "x-request-id",
    trustProxy: config.TRUST_PROXY,
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
  });

  // Our own JSON parser: raw bytes in, so that invalid UTF-8, empty bodies and prototype keys get
  // the contract's errors. Other media types fall through to Fastify's 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    "application/json",
    { parseAs: "buffer", bodyLimit: config.BODY_LIMIT_BYTES },
    (req, body, done) => {
      const charset = /charset\s*=\s*"?([^";\s]+)/i.exec(req.headers["content-type"] ?? "")?.[1];
      if (charset && !/^utf-?8$/i.test(charset)) {
        done(
          new HttpError("unsupported_media_type", `charset ${charset} is not supported`),
          undefined,
        );
        return;
      }
      try {
        done(null, parseJsonBody(body as Buffer));
      } catch (err) {
        done(err as Error, undefined);
      }
    },
  );

  // While closing, requests still arriving on open keep-alive connections get the contract's 503
  // (Fastify already sets `Connection: close` on them).
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onRequest", async () => {
    if (closing) {
      throw new HttpError("unavailable", "the service is shutting down", {
        headers: { "retry-after": 1 },
      });
    }
  });

  app.addHook("onResponse", async (req, reply) => {
    metrics.requests.inc({ route: req.routeOptions.url ?? "unmatched", status: reply.statusCode });
  });

  app.setErrorHandler((err, req, reply) => sendError(req, reply, toHttpError(err, req)));
  app.setNotFoundHandler((req, reply) =>
    sendError(
      req,
      reply,
      new HttpError("not_found", `no route for ${req.method} ${req.url.split("?")[0]}`),
    ),
  );

  async function authenticate(req: FastifyRequest) {
    // Checks run before the body is read: authentication, then the burst limit.
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
    if (!isWellFormedKey(key)) {
      limits.recordAuthFailure(req.ip);
      throw unauthorized("invalid_project_key", "the project key is not valid");
    }
    let project: KeyLookup | null;
    try {
      project = await deps.lookupKey(key);
    } catch {
      throw new HttpError("unavailable", "the service cannot check keys right now", {
        headers: { "retry-after": 1 },
      });
    }
    if (!project) {
      limits.recordAuthFailure(req.ip);
      throw unauthorized("invalid_project_key", "the project key is not valid");
    }
    await limits.consumeBurst(project);
    req.project = project;
  }

  app.route({
    method: "POST",
    url: REPORT_PATH,
    onRequest: async (req, reply) => {
      reply.header("x-request-id", req.id);
      await authenticate(req);
    },
    preParsing: async (req) => {
      // Body size before media type, as the contract orders them, when the length is declared.
      const length = Number(req.headers["content-length"]);
      if (length > config.BODY_LIMIT_BYTES) {
        throw new HttpError(
          "payload_too_large",
          `the body is over ${config.BODY_LIMIT_BYTES} bytes`,
        );
      }
    },
    handler: async (req, reply) => {
      const project = req.project as KeyLookup;
      if (req.body === undefined) throw new HttpError("invalid_json", "the body is empty");
      const receivedAt = Date.now();
      const record = validateReport(req.body, {
        reportId: uuidv7(receivedAt),
        projectId: project.projectId,
        keyId: project.keyId,
        receivedAt,
      });
      // The backlog bound belongs to the enqueue: after validation, before the quota is used.
      backlog.check();
      const refund = await limits.consumeQuota(project);
      try {
        await enqueuer.enqueue(toRow(record));
      } catch (err) {
        await refund();
        throw err;
      }
      return reply.send({ id: record.report_id });
    },
  });

  app.route({
    method: ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"],
    url: REPORT_PATH,
    exposeHeadRoute: false,
    handler: async () => {
      throw new HttpError("method_not_allowed", "use POST", { headers: { allow: "POST" } });
    },
  });

  app.get("/healthz", async () => ({ status: "ok" }));

  app.get("/readyz", async (_req, reply) => {
    const s = backlog.state();
    const problem = backlog.problem();
    reply.code(problem ? 503 : 200);
    return {
      status: problem ? "unavailable" : "ok",
      checks: {
        redis: { ok: s.redisOk },
        backlog: { ok: s.redisOk && !problem, jobs: s.backlogJobs, memory_ratio: s.memoryRatio },
      },
      ...(problem ? { reason: problem } : {}),
    };
  });

  // With METRICS_PORT set, /metrics is on a listener of its own (create-edge.ts), not here.
  if (config.METRICS_PORT === undefined) registerMetricsRoute(app, { config, backlog, metrics });

  const openapi = buildOpenApi();
  app.get("/openapi.json", async () => openapi);

  return app;
}

/** How often Node checks for requests over their time: a quarter of the shorter timeout, ≤ 1 s. */
function sweepInterval(config: Pick<Config, "REQUEST_TIMEOUT_MS" | "HEADERS_TIMEOUT_MS">) {
  const shorter = Math.min(config.REQUEST_TIMEOUT_MS, config.HEADERS_TIMEOUT_MS);
  return Math.max(25, Math.min(1_000, Math.floor(shorter / 4)));
}

function clientErrorHandler(err: Error & { code?: string }, socket: Duplex) {
  // A reset connection has nobody left to answer.
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const error =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? new HttpError("request_timeout", "the request took too long")
      : err.code === "HPE_HEADER_OVERFLOW"
        ? new HttpError("headers_too_large", "the request headers are too large")
        : new HttpError("invalid_json", "the request could not be read");
  const body = JSON.stringify(error.toBody());
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

function sendError(req: FastifyRequest, reply: FastifyReply, err: HttpError) {
  if (err.status >= 500) req.log.error({ code: err.code, err: err.cause }, err.message);
  for (const [name, value] of Object.entries(err.extra.headers ?? {})) reply.header(name, value);
  return reply.code(err.status).send(err.toBody());
}

/** Fastify's own errors mapped onto the contract's codes; anything else is a bug (500). */
function toHttpError(err: unknown, req: FastifyRequest): HttpError {
  if (err instanceof HttpError) return err;
  const code = (err as { code?: string }).code;
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
  const status = (err as { statusCode?: number }).statusCode;
  if (status === 408) return new HttpError("request_timeout", "the request took too long");
  if (status === 400) return new HttpError("invalid_json", "the request could not be read");
  const internal = new HttpError("internal", "internal error");
  internal.cause = err;
  req.log.error({ err }, "unhandled error");
  return internal;
}
