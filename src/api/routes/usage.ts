import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { toCsv } from "../csv.js";
import { encodeAnswer, precompress, sendEncoded } from "../encoded-answer.js";
import { parseQuery } from "../params.js";
import { type RollingAnswer, readUsage, refreshUsage, type UsageDeps } from "../queries/usage.js";
import { usagePoint, usageQuery } from "../schemas/usage.js";
import { pointsJson } from "../usage-rolling.js";

// GET /api/v1/usage: a time series from the rollups (minute rollups for minute and hour windows,
// daily ones for days), per window and per group. A query that would return more than
// READ_MAX_POINTS points is refused with a 400 that says how to narrow it, never cut short.
// The SQL, the row mapping and the answers' caches: queries/usage.ts.

/** Fields a CSV answer leaves out: a nested object or a list has no column. */
const NOT_IN_CSV = new Set(["used_pct_by_dimension", "members"]);
/** A point's fields that say what it is of, not its figures. */
const OF = new Set(["bucket", "provider", "model", "pool", "kind", "label", "members", "app"]);
const FIGURES = Object.keys(usagePoint.shape).filter((k) => !OF.has(k) && !NOT_IN_CSV.has(k));

/** CSV when asked for by `format=csv` or by `Accept: text/csv` (and not `format=json`). */
export function wantsCsv(req: FastifyRequest, format: string | undefined): boolean {
  if (format !== undefined) return format === "csv";
  return /\btext\/csv\b/i.test(req.headers.accept ?? "");
}

export function sendCsv(reply: FastifyReply, rows: Record<string, unknown>[], columns: string[]) {
  reply.header("content-type", "text/csv; charset=utf-8");
  return reply.send(toCsv(columns, rows));
}

export const usageRoutes: FastifyPluginAsync<UsageDeps> = async (app, deps) => {
  app.get("/api/v1/usage", async (req, reply) => {
    const q = parseQuery(usageQuery, req.query);
    const project = req.project as KeyLookup;
    const { format: _, ...asked } = q;
    const csv = wantsCsv(req, q.format);
    // A pool's points name it by id, kind and label (its members are left out: a list).
    const columns = (groups: string[]) => [
      "bucket",
      ...(groups.includes("pool")
        ? ["provider", "model", "pool", "kind", "label", ...groups.filter((g) => g === "app")]
        : groups),
      ...FIGURES,
    ];
    if (deps.answers && q.from === undefined && q.to === undefined) {
      const shared = await deps.answers.get<RollingAnswer>(
        project.projectId,
        JSON.stringify(["usage", asked]),
        async (previous) => {
          const next = await refreshUsage(deps, project, q, previous);
          // Most polled answers go to browsers, which take br.
          await precompress(next.encoded, "br");
          return next;
        },
      );
      if (!csv) return sendEncoded(req, reply, shared.encoded, ["Accept"]);
      const points = JSON.parse(pointsJson(shared.entries)) as Record<string, unknown>[];
      return sendCsv(reply, points, columns(shared.groups));
    }
    const out = await readUsage(deps, project, q);
    if (!csv) return sendEncoded(req, reply, encodeAnswer(out, project.projectId), ["Accept"]);
    return sendCsv(reply, out.points, columns(out.group_by));
  });
};
