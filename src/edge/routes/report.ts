import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { AuthDeps } from "../../http/authenticate.js";
import { createAuthenticate } from "../../http/authenticate.js";
import { HttpError, type Issue } from "../../http/errors.js";
import { refuseOtherMethods } from "../../http/post-only.js";
import { requireScope } from "../../http/scope.js";
import type { KeyLookup } from "../../keys/key-store.js";
import type { EnqueueError } from "../../queue/enqueue-error.js";
import type { Enqueuer } from "../../queue/enqueuer.js";
import { newReportId } from "../../report/report-id.js";
import { type ReportRow, toRow } from "../../report/report-schema.js";
import { warningKind } from "../../report/warning-kind.js";
import type { BacklogGate } from "../backlog.js";
import type { BodiesInFlight } from "../bytes-in-flight.js";
import type { Limits, Refund } from "../limits.js";
import type { EdgeMetrics } from "../metrics.js";
import { validateReport } from "../parse-report.js";

// POST /api/report, in the contract's order: key (and its scope), burst limit (both before the body is read),
// body size, media type, JSON and report validation, backlog bound, quota, durable enqueue. The
// 200 goes out only after Redis acknowledged the job holding the report.
//
// Every report takes this path, so its steps are callbacks that go on at once when they can:
// a known key, a token in hand and a plan without a quota need no promise, and the answer waits
// only for the job's acknowledgement.

export interface ReportRouteDeps extends AuthDeps {
  bodyLimit: number;
  retentionDays: number;
  /** POOL_SECRET: the key of the account hashes (report/pool-account.ts). */
  poolSecret?: string;
  limits: Limits;
  backlog: Pick<BacklogGate, "check">;
  enqueuer: Pick<Enqueuer, "add">;
  bodies: Pick<BodiesInFlight, "hold">;
  metrics: Pick<EdgeMetrics, "reportWarnings">;
}

export const REPORT_PATH = "/api/report";

const JSON_TYPE = "application/json; charset=utf-8";

/** A hook's callback: on, or the error that answers the request. */
type Done = (err?: Error) => void;

export const reportRoutes: FastifyPluginAsync<ReportRouteDeps> = async (app, deps) => {
  const { bodyLimit, retentionDays, poolSecret, limits, backlog, enqueuer, metrics, bodies } = deps;
  const authenticate = createAuthenticate(deps);

  /** The key's scope, then the burst limit, then the declared body size. */
  function admit(req: FastifyRequest, reply: FastifyReply, project: KeyLookup, done: Done): void {
    try {
      // A read key never stores a report, nor spends the project's burst.
      requireScope(project, "report");
      const burst = limits.consumeBurst(project);
      req.project = project;
      if (burst) burst.then(() => holdBody(req, reply, project, done), done);
      else holdBody(req, reply, project, done);
    } catch (err) {
      done(err as Error);
    }
  }

  /**
   * Body size before media type, as the contract orders them, when the length is declared; then
   * the body is held for the project (bytes-in-flight.ts) until its answer.
   */
  function holdBody(req: FastifyRequest, reply: FastifyReply, project: KeyLookup, done: Done) {
    try {
      bodies.hold(req, reply, project.projectId, bodyLimit);
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  /** Hands the row to the next job; the answer goes out once that job is acknowledged. */
  function store(
    reply: FastifyReply,
    row: ReportRow,
    id: string,
    warnings: Issue[],
    refund: Refund,
  ) {
    enqueuer.add(row, (err) => answer(reply, id, warnings, refund, err));
  }

  /**
   * The 200 once the job holding the report is acknowledged; otherwise the error, the quota
   * given back when the report is surely not stored.
   */
  function answer(
    reply: FastifyReply,
    id: string,
    warnings: Issue[],
    refund: Refund,
    err: EnqueueError | undefined,
  ): void {
    if (err) {
      // A report that may be stored stays counted: refunding it would let every report
      // through uncounted while a replica is away.
      if (err.mayBeStored) reply.send(err);
      else
        refund().then(
          () => reply.send(err),
          (refundErr) => reply.send(refundErr),
        );
      return;
    }
    if (warnings.length === 0) {
      // Serialised here: a report id needs no escaping.
      reply.header("content-type", JSON_TYPE).send(`{"id":"${id}"}`);
      return;
    }
    for (const w of warnings) metrics.reportWarnings.inc({ kind: warningKind(w.path) });
    reply.send({ id, warnings });
  }

  app.route({
    method: "POST",
    url: REPORT_PATH,
    onRequest: (req, reply, done) => {
      reply.header("x-request-id", req.id);
      let project: KeyLookup | Promise<KeyLookup>;
      try {
        project = authenticate(req);
      } catch (err) {
        done(err as Error);
        return;
      }
      if (project instanceof Promise) project.then((p) => admit(req, reply, p, done), done);
      else admit(req, reply, project, done);
    },
    handler: (req, reply) => {
      const project = req.project as KeyLookup;
      if (req.body === undefined) throw new HttpError("invalid_json", "the body is empty");
      // The id is made after the receive time: its time is never before it.
      const receivedAt = Date.now();
      const { record, warnings } = validateReport(
        req.body,
        {
          reportId: newReportId(),
          projectId: project.projectId,
          keyId: project.keyId,
          receivedAt,
        },
        { retentionDays, poolSecret },
      );
      // The backlog bound belongs to the enqueue: after validation, before the quota is used.
      backlog.check();
      const id = record.report_id;
      const row = toRow(record);
      const quota = limits.consumeQuota(project);
      if (quota instanceof Promise) {
        quota.then(
          (refund) => store(reply, row, id, warnings, refund),
          (err) => reply.send(err),
        );
      } else store(reply, row, id, warnings, quota);
    },
  });

  refuseOtherMethods(app, REPORT_PATH);
};
