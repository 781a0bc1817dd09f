import type { FastifyPluginAsync } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { EnqueueError, type Enqueuer } from "../../queue/enqueuer.js";
import { newReportId } from "../../report/report-id.js";
import { toRow } from "../../report/report-schema.js";
import type { AuthDeps } from "../authenticate.js";
import { createAuthenticate } from "../authenticate.js";
import type { BacklogGate } from "../backlog.js";
import { HttpError } from "../errors.js";
import type { Limits } from "../limits.js";
import type { EdgeMetrics } from "../metrics.js";
import { validateReport } from "../parse-report.js";

// POST /api/report, in the contract's order: key, burst limit (both before the body is read),
// body size, media type, JSON and report validation, backlog bound, quota, durable enqueue. The
// 200 goes out only after Redis acknowledged the job holding the report.

export interface ReportRouteDeps extends AuthDeps {
  bodyLimit: number;
  retentionDays: number;
  limits: Limits;
  backlog: Pick<BacklogGate, "check">;
  enqueuer: Pick<Enqueuer, "enqueue">;
  metrics: Pick<EdgeMetrics, "reportWarnings">;
}

declare module "fastify" {
  interface FastifyRequest {
    project?: KeyLookup;
  }
}

export const REPORT_PATH = "/api/report";

export const reportRoutes: FastifyPluginAsync<ReportRouteDeps> = async (app, deps) => {
  const { bodyLimit, retentionDays, limits, backlog, enqueuer, metrics } = deps;
  const authenticate = createAuthenticate(deps);

  app.route({
    method: "POST",
    url: REPORT_PATH,
    onRequest: async (req, reply) => {
      reply.header("x-request-id", req.id);
      const project = await authenticate(req);
      await limits.consumeBurst(project);
      req.project = project;
    },
    preParsing: async (req) => {
      // Body size before media type, as the contract orders them, when the length is declared.
      if (Number(req.headers["content-length"]) > bodyLimit) {
        throw new HttpError("payload_too_large", `the body is over ${bodyLimit} bytes`);
      }
    },
    handler: async (req, reply) => {
      const project = req.project as KeyLookup;
      if (req.body === undefined) throw new HttpError("invalid_json", "the body is empty");
      const receivedAt = Date.now();
      const { record, warnings } = validateReport(
        req.body,
        {
          reportId: newReportId(),
          projectId: project.projectId,
          keyId: project.keyId,
          receivedAt,
        },
        { retentionDays },
      );
      // The backlog bound belongs to the enqueue: after validation, before the quota is used.
      backlog.check();
      const refund = await limits.consumeQuota(project);
      try {
        await enqueuer.enqueue(toRow(record));
      } catch (err) {
        // A report that may be stored stays counted: refunding it would let every report
        // through uncounted while a replica is away.
        if (!(err instanceof EnqueueError && err.mayBeStored)) await refund();
        throw err;
      }
      if (warnings.length === 0) return reply.send({ id: record.report_id });
      for (const w of warnings) metrics.reportWarnings.inc({ path: w.path });
      return reply.send({ id: record.report_id, warnings });
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
};
