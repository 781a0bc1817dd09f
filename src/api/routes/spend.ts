import type { FastifyPluginAsync } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { parseQuery } from "../params.js";
import { readSpend, type SpendDeps } from "../queries/spend.js";
import { spendQuery } from "../schemas/spend.js";

// GET /api/v1/spend: per provider over a range (default: the last 24 hours), the cost and
// the requests from the rollups (reports, less provider hints: a client's start-up hint is no
// request to the provider), the cost per hour over the range, and the last credit balance.
// The credits' burn and the hours until they are depleted are /headroom's, now (now-model.ts):
// those of the provider's series with the newest credits report, never a second burn rate
// spread over the range's idle hours. Ranges up to 7 days read the minute rollups (whole
// minutes); longer ones the daily rollups (whole days, UTC). The query: queries/spend.ts.

export const spendRoutes: FastifyPluginAsync<SpendDeps> = async (app, deps) => {
  app.get("/api/v1/spend", async (req) => {
    const q = parseQuery(spendQuery, req.query);
    return readSpend(deps, req.project as KeyLookup, q);
  });
};
