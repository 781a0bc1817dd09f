import type { FastifyPluginAsync } from "fastify";
import type { AuthDeps } from "../../http/authenticate.js";
import { createAuthenticate } from "../../http/authenticate.js";
import { HttpError, unavailable } from "../../http/errors.js";
import { refuseOtherMethods } from "../../http/post-only.js";
import { requireScope } from "../../http/scope.js";
import type { KeyLookup } from "../../keys/key-store.js";
import type { EnqueueError } from "../../queue/enqueue-error.js";
import type { Enqueuer } from "../../queue/enqueuer.js";
import type { IdJobs } from "../../queue/id-jobs.js";
import type { BacklogGate } from "../backlog.js";
import {
  claimIds,
  type ItemResult,
  resultsJson,
  settleIds,
  type Taken,
  unsureBody,
  validateBatch,
} from "../batch-items.js";
import type { BodiesInFlight } from "../bytes-in-flight.js";
import { charsetRefusal } from "../content-charset.js";
import type { Limits } from "../limits.js";
import type { EdgeMetrics } from "../metrics.js";
import type { BatchFormat } from "../parse-batch.js";
import type { ReportIds } from "../report-ids.js";

// POST /api/reports: many reports in one request, each validated, limited and answered on its
// own, in order. Key first (before the body is read), then body size, media type, the envelope,
// each item's validation, the backlog bound, the items' ids, the burst limit and the quota for
// the reports left (the first k of n pass), and one durable enqueue of them all (group commit
// puts them in as few jobs as ENQUEUE_MAX_REPORTS allows; those with ids go in a job of their
// own, which their claims name: report-ids.ts). 200 when every item was taken, 207
// when some were not.

export interface BatchRouteDeps extends AuthDeps {
  bodyLimit: number;
  maxReports: number;
  retentionDays: number;
  /** POOL_SECRET: the key of the account hashes (report/pool-account.ts). */
  poolSecret?: string;
  limits: Limits;
  backlog: Pick<BacklogGate, "check">;
  enqueuer: Pick<Enqueuer, "enqueueMany" | "writeJob">;
  reportIds: ReportIds;
  idJobs: Pick<IdJobs, "place" | "written">;
  metrics: Pick<EdgeMetrics, "reportWarnings">;
  bodies: Pick<BodiesInFlight, "hold">;
}

export const BATCH_PATH = "/api/reports";

const MEDIA: Record<string, BatchFormat> = {
  "application/json": "json",
  "application/x-ndjson": "ndjson",
  "application/ndjson": "ndjson",
};
const JSON_TYPE = "application/json; charset=utf-8";

interface RawBody {
  format: BatchFormat;
  bytes: Buffer;
}

export const batchRoutes: FastifyPluginAsync<BatchRouteDeps> = async (app, deps) => {
  const {
    bodyLimit,
    maxReports,
    retentionDays,
    poolSecret,
    limits,
    backlog,
    enqueuer,
    reportIds,
    idJobs,
  } = deps;
  const { metrics, bodies } = deps;
  const authenticate = createAuthenticate(deps);

  // This plugin's own parsers: raw bytes, parsed in the handler once the key is known. Any
  // other type (or none) gets this route's 415, which names both types, not the edge's.
  app.removeAllContentTypeParsers();
  const parse: Parameters<typeof app.addContentTypeParser>[2] = (req, body, done) => {
    const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
    const refusal = charsetRefusal(req.headers["content-type"]);
    if (refusal) {
      done(refusal, undefined);
      return;
    }
    const format = MEDIA[type];
    if (!format) {
      done(
        new HttpError(
          "unsupported_media_type",
          "send Content-Type: application/json or application/x-ndjson",
        ),
        undefined,
      );
      return;
    }
    done(null, { format, bytes: body as Buffer } satisfies RawBody);
  };
  app.addContentTypeParser(Object.keys(MEDIA), { parseAs: "buffer", bodyLimit }, parse);
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit }, parse);

  app.route({
    method: "POST",
    url: BATCH_PATH,
    bodyLimit,
    onRequest: async (req, reply) => {
      reply.header("x-request-id", req.id);
      const project = await authenticate(req);
      // Before any limit: a read key spends nothing and stores nothing.
      requireScope(project, "report");
      req.project = project;
    },
    preParsing: async (req, reply) => {
      // The declared size (413 over the limit), held for the project until the answer.
      bodies.hold(req, reply, (req.project as KeyLookup).projectId, bodyLimit);
    },
    handler: async (req, reply) => {
      const project = req.project as KeyLookup;
      const raw = req.body as RawBody | undefined;
      if (raw === undefined) throw new HttpError("invalid_json", "the body is empty");
      // Each item as a single report is validated.
      const results: ItemResult[] = [];
      const valid = validateBatch(raw.bytes, raw.format, maxReports, results, project, Date.now(), {
        retentionDays,
        poolSecret,
      });

      if (valid.length > 0) backlog.check();
      const fresh = await claimIds(valid, results, project, reportIds, idJobs);
      const place = fresh.place;
      const idsOf = (ts: Taken[]) => ts.flatMap((t) => (t.clientId ? [t.clientId] : []));

      // The burst limit, then the quota: the first reports pass, the rest are refused.
      let burst: Awaited<ReturnType<Limits["consumeBurstMany"]>>;
      let quota: Awaited<ReturnType<Limits["consumeQuotaMany"]>>;
      try {
        burst = await limits.consumeBurstMany(project, fresh.taken.length);
        quota = await limits.consumeQuotaMany(project, burst.granted);
      } catch (err) {
        // Redis failed: nothing was taken, so a retry is a first send.
        await settleIds(reportIds, project, idsOf(fresh.taken), place, "released", req.log);
        throw err;
      }
      const admitted = fresh.taken.slice(0, quota.granted);
      const refused = fresh.taken.slice(quota.granted);
      refused.forEach((t, j) => {
        // Its place among the reports that needed the limits: within the burst's grant, the
        // quota refused it.
        const refusal = quota.granted + j < burst.granted ? quota.refusal : burst.refusal;
        results[t.index] = (refusal as HttpError).toBody();
      });
      const refusal = burst.refusal ?? quota.refusal;
      await settleIds(reportIds, project, idsOf(refused), place, "released", req.log);
      if (refusal) {
        for (const [name, value] of Object.entries(refusal.extra.headers ?? {})) {
          reply.header(name, value);
        }
        // None could be taken, and nothing else was: the whole request is refused.
        if (admitted.length === 0 && !results.some((r) => r && "id" in r)) throw refusal;
      }

      // Reports with ids in the job their claims name, the others in the shared jobs.
      const withIds = admitted.filter((t) => t.clientId !== null);
      const others = admitted.filter((t) => t.clientId === null);
      const [idsError, errors] = await Promise.all([
        withIds.length === 0
          ? undefined
          : enqueuer
              .writeJob(
                place.shard,
                place.token,
                withIds.map((t) => t.row),
              )
              .then(
                () => undefined,
                (err: EnqueueError) => err,
              ),
        enqueuer.enqueueMany(others.map((t) => t.row)),
      ]);
      const errorOf = new Map<Taken, EnqueueError | undefined>();
      for (const t of withIds) errorOf.set(t, idsError);
      others.forEach((t, i) => {
        errorOf.set(t, errors[i]);
      });
      let lost = 0;
      for (const t of admitted) {
        const err = errorOf.get(t);
        if (err === undefined) {
          if (t.warnings.length === 0) results[t.index] = { id: t.reportId };
          else {
            results[t.index] = { id: t.reportId, warnings: t.warnings };
            for (const w of t.warnings) metrics.reportWarnings.inc({ path: w.path });
          }
          continue;
        }
        // A report that may be stored stays counted.
        if (!err.mayBeStored) lost += 1;
        results[t.index] = err.mayBeStored
          ? unsureBody(t.clientId !== null)
          : unavailable("the queue cannot take reports right now").toBody();
      }
      const outcome =
        idsError === undefined ? "stored" : idsError.mayBeStored ? "unknown" : "released";
      await Promise.all([
        quota.refund(lost),
        settleIds(reportIds, project, idsOf(withIds), place, outcome, req.log),
      ]);

      // An id repeated within the batch is answered as its first item was.
      for (const [t, first] of fresh.repeats) {
        const r = results[first.index] as ItemResult;
        results[t.index] = "id" in r ? { id: r.id as string, duplicate: true } : r;
      }
      const allTaken = results.every((r) => "id" in r);
      return reply
        .code(allTaken ? 200 : 207)
        .header("content-type", JSON_TYPE)
        .send(resultsJson(results));
    },
  });

  refuseOtherMethods(app, BATCH_PATH);
};
