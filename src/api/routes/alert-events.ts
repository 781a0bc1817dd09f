import type { FastifyPluginAsync } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { parseQuery } from "../params.js";
import { type AlertEventsDeps, readAlertEvents } from "../queries/alert-events.js";
import { alertEventsQuery } from "../schemas/alert-events.js";

// GET /api/v1/alerts/events: the project's alert events, newest first (time, then id), a page
// at a time (the query: queries/alert-events.ts).

export const alertEventsRoutes: FastifyPluginAsync<AlertEventsDeps> = async (app, deps) => {
  app.get("/api/v1/alerts/events", async (req) => {
    const q = parseQuery(alertEventsQuery, req.query);
    return readAlertEvents(deps, req.project as KeyLookup, q);
  });
};
