import type { FastifyPluginAsync } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { parseQuery } from "../params.js";
import { type ReportsDeps, readReports } from "../queries/reports.js";
import { reportsQuery } from "../schemas/reports.js";

// GET /api/v1/reports: the project's reports, newest first (timestamp, then id as text: a
// UUID's own order in ClickHouse is not its text's), a page at a time (the query:
// queries/reports.ts).

export const reportsRoutes: FastifyPluginAsync<ReportsDeps> = async (app, deps) => {
  app.get("/api/v1/reports", async (req) => {
    const q = parseQuery(reportsQuery, req.query);
    return readReports(deps, req.project as KeyLookup, q);
  });
};
