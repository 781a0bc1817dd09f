import fp from "fastify-plugin";
import type { EdgeMetrics } from "../metrics.js";
import { unavailable } from "../errors.js";

// Per-request work every route shares: the contract's 503 for requests that still arrive on open
// keep-alive connections while the edge closes (Fastify already sets `Connection: close` on
// them), and the request counter.

export const lifecycle = fp<{ metrics: EdgeMetrics }>(
  async (app, { metrics }) => {
    let closing = false;
    app.addHook("preClose", async () => {
      closing = true;
    });
    app.addHook("onRequest", async () => {
      if (closing) throw unavailable("the service is shutting down");
    });
    app.addHook("onResponse", async (req, reply) => {
      metrics.requests.inc({
        route: req.routeOptions.url ?? "unmatched",
        status: reply.statusCode,
      });
    });
  },
  { name: "lifecycle" },
);
