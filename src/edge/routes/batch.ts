import type { FastifyPluginAsync } from "fastify";
import type { AuthDeps } from "../../http/authenticate.js";
import { HttpError } from "../../http/errors.js";
import { refuseOtherMethods } from "../../http/post-only.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { type ItemResult, resultsJson, validateBatch } from "../batch-items.js";
import type { BodiesInFlight } from "../bytes-in-flight.js";
import { charsetRefusal } from "../content-charset.js";
import type { Limits } from "../limits.js";
import type { BatchFormat } from "../parse-batch.js";
import { reportBodyHooks } from "../report-hooks.js";
import { type TakeReportsDeps, takeReports } from "../take-reports.js";
import type { WorkTurns } from "../work-turns.js";

// POST /api/reports: many reports in one request, each validated, limited and answered on its
// own, in order. Key first (before the body is read), then body size, media type, the envelope,
// each item's validation, the backlog bound, the items' ids, the burst limit and the quota for
// the reports left (the first k of n pass), and one durable enqueue of them all (group commit
// puts them in as few jobs as ENQUEUE_MAX_REPORTS allows; those with ids go in a job of their
// own, which their claims name: report-ids.ts; take-reports.ts does all this after validation).
// 200 when every item was taken, 207 when some were not.

export interface BatchRouteDeps extends AuthDeps, Omit<TakeReportsDeps, "limits"> {
  limits: Limits;
  bodyLimit: number;
  maxReports: number;
  retentionDays: number;
  /** POOL_SECRET: the key of the account hashes (report/pool-account.ts). */
  poolSecret?: string;
  bodies: Pick<BodiesInFlight, "hold">;
  turns: Pick<WorkTurns, "take" | "end">;
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
  const { bodyLimit, maxReports, retentionDays, poolSecret } = deps;

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
    ...reportBodyHooks(deps, bodyLimit),
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

      await takeReports(deps, valid, results, project, reply, req.log);
      const allTaken = results.every((r) => "id" in r);
      return reply
        .code(allTaken ? 200 : 207)
        .header("content-type", JSON_TYPE)
        .send(resultsJson(results));
    },
  });

  refuseOtherMethods(app, BATCH_PATH);
};
