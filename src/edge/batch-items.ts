import { HttpError, type Issue, unavailable } from "../http/errors.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { IdJobs, JobPlace } from "../queue/id-jobs.js";
import { newReportIds, UUID_TEXT } from "../report/report-id.js";
import { type ReportRow, toRow } from "../report/report-schema.js";
import { type BatchFormat, type BatchItem, parseBatchBody } from "./parse-batch.js";
import { type ValidateOptions, validateReport } from "./parse-report.js";
import type { ClaimState, ReportIds } from "./report-ids.js";

// A batch's items one by one: each validated as a single report (with the client's optional id),
// and the ids claimed so that a repeat is answered as a duplicate instead of stored again.

export type ItemResult =
  | { id: string; warnings?: Issue[]; duplicate?: true }
  | Record<string, unknown>;

export interface Taken {
  index: number;
  /** The report as it is enqueued. */
  row: ReportRow;
  reportId: string;
  /** The client's id, when it chose one. */
  clientId: string | null;
  warnings: Issue[];
}

/**
 * A batch's body → the reports to take, in order; each item that is no report gets its error in
 * `results` at its index. Only rows are kept: the parsed items and records are garbage before the
 * request waits for Redis, so that a batch in flight holds little.
 */
export function validateBatch(
  body: Buffer,
  format: BatchFormat,
  maxReports: number,
  results: ItemResult[],
  project: KeyLookup,
  receivedAt: number,
  options: ValidateOptions,
): Taken[] {
  const items = parseBatchBody(body, format, maxReports);
  results.length = items.length;
  const valid: Taken[] = [];
  // The ids the server gives, stamped with the receive time, made together.
  const ids = newReportIds(items.length, receivedAt);
  for (let index = 0; index < items.length; index++) {
    const item = items[index] as BatchItem;
    if ("error" in item) {
      results[index] = item.error.toBody();
      continue;
    }
    try {
      valid.push(
        validateItem(item.value, index, ids[index] as string, project, receivedAt, options),
      );
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      results[index] = err.toBody();
    }
  }
  return valid;
}

/**
 * One item → a report to take, with its client id, or the HttpError of a single report. `newId`
 * is its id unless the client chose one.
 */
export function validateItem(
  value: unknown,
  index: number,
  newId: string,
  project: KeyLookup,
  receivedAt: number,
  options: ValidateOptions,
): Taken {
  let clientId: string | null = null;
  let idIssue: Issue | null = null;
  if (value !== null && typeof value === "object" && Object.hasOwn(value, "id")) {
    const id = (value as { id: unknown }).id;
    if (typeof id === "string" && UUID_TEXT.test(id)) clientId = id.toLowerCase();
    else if (id !== null) idIssue = { path: "id", message: "expected a UUID or null" };
  }
  let valid: ReturnType<typeof validateReport>;
  try {
    valid = validateReport(
      value,
      {
        reportId: clientId ?? newId,
        projectId: project.projectId,
        keyId: project.keyId,
        receivedAt,
      },
      options,
    );
  } catch (err) {
    if (idIssue && err instanceof HttpError && err.extra.issues) err.extra.issues.unshift(idIssue);
    throw err;
  }
  if (idIssue) {
    throw new HttpError("invalid_report", `${idIssue.path}: ${idIssue.message}`, {
      issues: [idIssue],
    });
  }
  const { record, warnings } = valid;
  return { index, row: toRow(record), reportId: record.report_id, clientId, warnings };
}

/**
 * The answer's body, `{"results":[…]}`, as JSON.stringify writes it: an item answered with its id
 * alone (most are) from a template, since a report id needs no escaping (ours are hex, a client's
 * passed the UUID check), anything else by JSON.stringify.
 */
export function resultsJson(results: ItemResult[]): string {
  let json = '{"results":[';
  for (let i = 0; i < results.length; i++) {
    const r = results[i] as ItemResult;
    if (i > 0) json += ",";
    json +=
      typeof r.id === "string" && r.warnings === undefined && r.duplicate === undefined
        ? `{"id":"${r.id}"}`
        : JSON.stringify(r);
  }
  return `${json}]}`;
}

/**
 * Claims the items' client ids for a job at a new place. Items whose id is stored already are
 * answered as duplicates (also an id repeated within the batch), those being enqueued elsewhere
 * are told to retry; an id left unknown by a send that got no answer is settled first (as a
 * duplicate if its job was written, else it is taken). The rest go on, in order.
 */
export async function claimIds(
  valid: Taken[],
  results: ItemResult[],
  project: KeyLookup,
  reportIds: ReportIds,
  idJobs: Pick<IdJobs, "place" | "written">,
): Promise<{ taken: Taken[]; repeats: [Taken, Taken][]; place: JobPlace }> {
  const place = idJobs.place();
  const firstOf = new Map<string, Taken>();
  for (const t of valid) if (t.clientId && !firstOf.has(t.clientId)) firstOf.set(t.clientId, t);
  if (firstOf.size === 0) return { taken: valid, repeats: [], place };
  const ids = [...firstOf.keys()];
  let claimed: ClaimState[];
  try {
    claimed = await reportIds.claim(project.projectId, ids, place);
  } catch {
    throw unavailable();
  }
  // One question per unknown job, however many of its ids come again.
  const asked = new Map<string, Promise<boolean>>();
  const settled = await Promise.all(
    ids.map(async (id, i): Promise<Settled> => {
      const c = claimed[i] as ClaimState;
      if (c.state !== "unknown") return c.state;
      try {
        let written = asked.get(c.job.token);
        if (!written) {
          written = idJobs.written(c.job);
          asked.set(c.job.token, written);
        }
        const stored = await written;
        const won = await reportIds.resolve(
          project.projectId,
          id,
          c.seen,
          stored ? "stored" : place,
        );
        return !won ? "pending" : stored ? "stored" : "new";
      } catch {
        return "unsettled";
      }
    }),
  );
  const state = new Map(ids.map((id, i) => [id, settled[i] as Settled]));
  const taken: Taken[] = [];
  const repeats: [Taken, Taken][] = [];
  for (const t of valid) {
    if (!t.clientId) {
      taken.push(t);
      continue;
    }
    const s = state.get(t.clientId);
    const first = firstOf.get(t.clientId) as Taken;
    if (s === "new" && first === t) taken.push(t);
    else if (s === "new") repeats.push([t, first]);
    else if (s === "pending") {
      results[t.index] = unavailable(
        "a report with this id is being enqueued by another request: send it again shortly",
      ).toBody();
    } else if (s === "unsettled") results[t.index] = unsureBody(true);
    else results[t.index] = { id: t.clientId, duplicate: true };
  }
  return { taken, repeats, place };
}

type Settled = "new" | "stored" | "pending" | "unsettled";

/** The answer for a report whose job's write got no answer: what a resend does depends on an id. */
export function unsureBody(hasId: boolean): Record<string, unknown> {
  return (
    hasId
      ? unavailable("the report may have been stored: sending it again with its id is safe")
      : unavailable(
          "the report may have been stored: sending it again may count it twice (give it an id)",
        )
  ).toBody();
}

export async function settleIds(
  reportIds: ReportIds,
  project: KeyLookup,
  ids: string[],
  place: JobPlace,
  outcome: "stored" | "unknown" | "released",
  log: { warn: (obj: object, msg: string) => void },
): Promise<void> {
  try {
    await reportIds.settle(project.projectId, ids, place, outcome);
  } catch (err) {
    // A claim left pending is settled by the next repeat of its id, once REPORT_ID_PENDING_MS passed.
    log.warn({ err: (err as Error).message, ids: ids.length }, "report ids not settled");
  }
}
