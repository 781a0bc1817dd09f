import type { FastifyBaseLogger, FastifyReply } from "fastify";
import { type HttpError, unavailable } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { EnqueueError } from "../queue/enqueue-error.js";
import type { Enqueuer } from "../queue/enqueuer.js";
import type { IdJobs } from "../queue/id-jobs.js";
import { warningKind } from "../report/warning-kind.js";
import type { BacklogGate } from "./backlog.js";
import { claimIds, type ItemResult, settleIds, type Taken, unsureBody } from "./batch-items.js";
import type { Limits } from "./limits.js";
import type { EdgeMetrics } from "./metrics.js";
import type { ReportIds } from "./report-ids.js";

// What a request of many reports does once each was validated (POST /api/reports, and the OTLP
// receiver's spans): the backlog bound, the items' ids, the burst limit and the quota for the
// reports left (the first k of n pass), and one durable enqueue of them all (group commit puts
// them in as few jobs as ENQUEUE_MAX_REPORTS allows; those with ids go in a job of their own,
// which their claims name: report-ids.ts). Each item's answer is written to `results`.

export interface TakeReportsDeps {
  limits: Pick<Limits, "consumeBurstMany" | "consumeQuotaMany">;
  backlog: Pick<BacklogGate, "check">;
  enqueuer: Pick<Enqueuer, "enqueueMany" | "writeJob">;
  reportIds: ReportIds;
  idJobs: Pick<IdJobs, "place" | "written">;
  metrics: Pick<EdgeMetrics, "reportWarnings">;
}

/**
 * Takes the valid reports of a request, answering each in `results` at its index (which holds the
 * invalid items' errors already). A limit's refusal puts its headers (Retry-After) on `reply`; when
 * nothing at all was taken, the refusal is thrown as the request's answer.
 */
export async function takeReports(
  deps: TakeReportsDeps,
  valid: Taken[],
  results: ItemResult[],
  project: KeyLookup,
  reply: FastifyReply,
  log: FastifyBaseLogger,
): Promise<void> {
  const { limits, backlog, enqueuer, reportIds, idJobs, metrics } = deps;
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
    await settleIds(reportIds, project, idsOf(fresh.taken), place, "released", log);
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
  await settleIds(reportIds, project, idsOf(refused), place, "released", log);
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
        for (const w of t.warnings) metrics.reportWarnings.inc({ kind: warningKind(w.path) });
      }
      continue;
    }
    // A report that may be stored stays counted.
    if (!err.mayBeStored) lost += 1;
    results[t.index] = err.mayBeStored
      ? unsureBody(t.clientId !== null)
      : unavailable("the queue cannot take reports right now").toBody();
  }
  const outcome = idsError === undefined ? "stored" : idsError.mayBeStored ? "unknown" : "released";
  await Promise.all([
    quota.refund(lost),
    settleIds(reportIds, project, idsOf(withIds), place, outcome, log),
  ]);

  // An id repeated within the request is answered as its first item was.
  for (const [t, first] of fresh.repeats) {
    const r = results[first.index] as ItemResult;
    results[t.index] = "id" in r ? { id: r.id as string, duplicate: true } : r;
  }
}
