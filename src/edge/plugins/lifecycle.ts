import fp from "fastify-plugin";
import { unavailable } from "../errors.js";
import { requestAnswered, requestStarted } from "../in-flight.js";
import type { EdgeMetrics } from "../metrics.js";

// Per-request work every route shares: the contract's 503 for requests that still arrive on open
// keep-alive connections while the edge closes (Fastify already sets `Connection: close` on
// them), the request counter, and the requests in flight per connection (in-flight.ts).

export const lifecycle = fp<{ metrics: EdgeMetrics }>(
  async (app, { metrics }) => {
    let closing = false;
    app.addHook("preClose", async () => {
      closing = true;
    });
    app.addHook("onRequest", async (req) => {
      requestStarted(req.raw);
      if (closing) throw unavailable("the service is shutting down");
    });
    app.addHook("onResponse", async (req, reply) => {
      requestAnswered(req.raw);
      metrics.requests.inc({
        route: req.routeOptions.url ?? "unmatched",
        status: reply.statusCode,
      });
    });
  },
  { name: "lifecycle" },
);
