import type { FastifyPluginAsync, FastifyReply } from "fastify";
import type { AuthDeps } from "../../http/authenticate.js";
import { keepsConnection, toHttpError } from "../../http/error-handler.js";
import { HttpError } from "../../http/errors.js";
import { refuseOtherMethods } from "../../http/post-only.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { decodeContent, decodeTraces, type OtlpEncoding } from "../../otlp/decode-traces.js";
import { ExportTraceServiceResponse, RpcStatus } from "../../otlp/otlp-schema.js";
import { spanReports } from "../../otlp/span-reports.js";
import { newReportIds } from "../../report/report-id.js";
import { type ItemResult, type Taken, validateItem } from "../batch-items.js";
import type { BodiesInFlight } from "../bytes-in-flight.js";
import type { Limits } from "../limits.js";
import type { EdgeMetrics, OtlpSpanOutcome } from "../metrics.js";
import { reportBodyHooks } from "../report-hooks.js";
import { type TakeReportsDeps, takeReports } from "../take-reports.js";
import type { WorkTurns } from "../work-turns.js";

// POST /v1/traces: an OTLP/HTTP trace export (what an OpenTelemetry exporter sends to
// `<endpoint>/v1/traces`), binary protobuf or JSON, gzip or not, with the project's report key as
// `Authorization: Bearer …`. Its provider calls become reports (otlp/span-reports.ts) and are
// taken as a batch's are (take-reports.ts): the same key checks, body hold, backlog bound, id
// claims, burst limit and quota. Each span's report id comes from its ids, so an export sent again
// stores nothing twice and counts once.
//
// Answers as OTLP/HTTP asks: 200 with an ExportTraceServiceResponse in the request's encoding,
// `partial_success` naming the provider spans refused for good (not valid as a report, the month's
// quota used up); errors as a google.rpc.Status in that encoding. A span that could not be taken
// *now* (burst limit, Redis, the queue) makes the whole answer a 429 or 503 with Retry-After:
// exporters retry those, and the spans that were taken come back as duplicates, so nothing of
// the export is lost and nothing counts twice.

export interface OtlpRouteDeps extends AuthDeps, Omit<TakeReportsDeps, "limits" | "metrics"> {
  limits: Limits;
  /** OTLP_LIMIT_BYTES: the largest body, as sent and once unzipped. */
  bodyLimit: number;
  /** BATCH_MAX_REPORTS: the most provider calls one export may hold. */
  maxReports: number;
  retentionDays: number;
  /** POOL_SECRET: the key of the account hashes (report/pool-account.ts). */
  poolSecret?: string;
  bodies: Pick<BodiesInFlight, "hold">;
  turns: Pick<WorkTurns, "take" | "end">;
  metrics: Pick<EdgeMetrics, "reportWarnings" | "unavailable" | "otlpSpans">;
}

export const OTLP_TRACES_PATH = "/v1/traces";

const MEDIA: Record<string, OtlpEncoding> = {
  "application/x-protobuf": "protobuf",
  "application/protobuf": "protobuf",
  "application/json": "json",
};
const CONTENT_TYPE: Record<OtlpEncoding, string> = {
  protobuf: "application/x-protobuf",
  json: "application/json",
};

interface RawBody {
  encoding: OtlpEncoding;
  bytes: Buffer;
}

/** google.rpc.Code of an answer's HTTP status (OTLP/HTTP answers errors with a Status). */
const RPC_CODE: Record<number, number> = {
  400: 3, // INVALID_ARGUMENT
  401: 16, // UNAUTHENTICATED
  403: 7, // PERMISSION_DENIED
  404: 5, // NOT_FOUND
  405: 12, // UNIMPLEMENTED
  408: 4, // DEADLINE_EXCEEDED
  413: 3,
  415: 3,
  429: 8, // RESOURCE_EXHAUSTED
  503: 14, // UNAVAILABLE
};

const encodingOf = (contentType: string | undefined): OtlpEncoding | undefined =>
  MEDIA[(contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? ""];

export const otlpTracesRoutes: FastifyPluginAsync<OtlpRouteDeps> = async (app, deps) => {
  const { bodyLimit, maxReports, retentionDays, poolSecret, metrics } = deps;

  // Errors in the request's encoding; a request of neither type (a 415, a GET) gets the edge's
  // JSON error body. Otherwise as the edge's error handler answers (src/http/error-handler.ts).
  app.setErrorHandler((err, req, reply) => {
    const httpError = toHttpError(err, req);
    if (keepsConnection(err, httpError, req)) reply.removeHeader("connection");
    if (httpError.extra.reason) metrics.unavailable.inc({ reason: httpError.extra.reason });
    if (httpError.status >= 500)
      req.log.error({ code: httpError.code, reason: httpError.extra.reason }, httpError.message);
    for (const [name, value] of Object.entries(httpError.extra.headers ?? {}))
      reply.header(name, value);
    const encoding = encodingOf(req.headers["content-type"]);
    if (encoding === undefined) return reply.code(httpError.status).send(httpError.toBody());
    return sendStatus(reply, encoding, httpError.status, `${httpError.code}: ${httpError.message}`);
  });

  app.removeAllContentTypeParsers();
  const parse: Parameters<typeof app.addContentTypeParser>[2] = (req, body, done) => {
    const encoding = encodingOf(req.headers["content-type"]);
    if (!encoding) {
      done(
        new HttpError(
          "unsupported_media_type",
          "send Content-Type: application/x-protobuf or application/json",
        ),
        undefined,
      );
      return;
    }
    done(null, { encoding, bytes: body as Buffer } satisfies RawBody);
  };
  app.addContentTypeParser(Object.keys(MEDIA), { parseAs: "buffer", bodyLimit }, parse);
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit }, parse);

  app.route({
    method: "POST",
    url: OTLP_TRACES_PATH,
    bodyLimit,
    ...reportBodyHooks(deps, bodyLimit),
    handler: async (req, reply) => {
      const project = req.project as KeyLookup;
      // An empty body is an empty export in protobuf (every field is optional), no JSON at all.
      const raw = (req.body as RawBody | undefined) ?? {
        encoding: encodingOf(req.headers["content-type"]) ?? "json",
        bytes: Buffer.alloc(0),
      };
      const bytes = await decodeContent(raw.bytes, req.headers["content-encoding"], bodyLimit);
      const mapped = spanReports(decodeTraces(bytes, raw.encoding));
      count(metrics, "ignored", mapped.ignored);
      count(metrics, "merged", mapped.merged);

      const receivedAt = Date.now();
      const items = mapped.reports;
      const results: ItemResult[] = new Array(items.length);
      const valid: Taken[] = [];
      // Unused (each span's report has its own id), but validateItem takes one.
      const ids = newReportIds(Math.min(items.length, maxReports), receivedAt);
      items.forEach((item, index) => {
        if (index >= maxReports) {
          results[index] = new HttpError(
            "payload_too_large",
            `an export holds at most ${maxReports} provider calls`,
          ).toBody();
          return;
        }
        try {
          valid.push(
            validateItem(item.body, index, ids[index] as string, project, receivedAt, {
              retentionDays,
              poolSecret,
            }),
          );
        } catch (err) {
          if (!(err instanceof HttpError)) throw err;
          results[index] = err.toBody();
        }
      });
      // An export without a provider call (most are) asks nothing of Redis.
      if (valid.length > 0) await takeReports(deps, valid, results, project, reply, req.log);
      return answer(reply, raw.encoding, results, mapped.rejected);
    },
  });

  /** The export's answer from each provider span's result. */
  function answer(
    reply: FastifyReply,
    encoding: OtlpEncoding,
    results: ItemResult[],
    invalid: { count: number; message: string | null },
  ) {
    let rejected = invalid.count;
    let rejection = invalid.message;
    let retry: { status: 429 | 503; message: string } | null = null;
    let stored = 0;
    let duplicates = 0;
    let warning: string | null = null;
    for (const r of results) {
      if ("id" in r) {
        if (r.duplicate) duplicates++;
        else stored++;
        const first = (r.warnings as { path: string; message: string }[] | undefined)?.[0];
        if (first) warning ??= `${first.path}: ${first.message}`;
        continue;
      }
      const code = r.error as string;
      if (code === "rate_limited" || code === "unavailable") {
        retry ??= { status: code === "rate_limited" ? 429 : 503, message: String(r.message) };
        continue;
      }
      rejected++;
      rejection ??= `${code}: ${String(r.message)}`;
    }
    count(metrics, "stored", stored);
    count(metrics, "duplicate", duplicates);
    count(metrics, "rejected", rejected);
    if (retry) {
      const later = results.length - stored - duplicates - (rejected - invalid.count);
      count(metrics, "retry", later);
      if (!reply.hasHeader("retry-after")) reply.header("retry-after", 1);
      return sendStatus(
        reply,
        encoding,
        retry.status,
        `${later} provider span(s) could not be taken now (${retry.message}): send the export again; the spans taken are not stored twice`,
      );
    }
    const message =
      rejected > 0
        ? `${rejected} provider span(s) refused: ${rejection}`
        : // A warning with nothing rejected, as the OTLP specification allows.
          warning === null
          ? null
          : `stored with warnings: ${warning}`;
    const response = ExportTraceServiceResponse.create(
      message === null
        ? {}
        : { partialSuccess: { rejectedSpans: rejected, errorMessage: message } },
    );
    return send(reply, encoding, 200, ExportTraceServiceResponse, response);
  }

  refuseOtherMethods(app, OTLP_TRACES_PATH);
};

function count(metrics: Pick<EdgeMetrics, "otlpSpans">, outcome: OtlpSpanOutcome, n: number): void {
  if (n > 0) metrics.otlpSpans.inc({ outcome }, n);
}

function sendStatus(reply: FastifyReply, encoding: OtlpEncoding, status: number, message: string) {
  const body = RpcStatus.create({ code: RPC_CODE[status] ?? 13, message });
  return send(reply, encoding, status, RpcStatus, body);
}

function send(
  reply: FastifyReply,
  encoding: OtlpEncoding,
  status: number,
  type: typeof RpcStatus,
  message: ReturnType<typeof RpcStatus.create>,
) {
  reply.code(status).header("content-type", CONTENT_TYPE[encoding]);
  if (encoding === "protobuf") return reply.send(Buffer.from(type.encode(message).finish()));
  // OTLP JSON: lowerCamelCase names, 64-bit integers as strings.
  return reply.send(JSON.stringify(type.toObject(message, { longs: String })));
}
