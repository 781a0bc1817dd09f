import fp from "fastify-plugin";
import type { Counter } from "prom-client";
import { unavailable } from "../../http/errors.js";
import { requestAnswered, requestStarted } from "../../http/in-flight.js";
import type { EdgeMetrics } from "../metrics.js";

// Per-request work every route shares: the contract's 503 for requests that still arrive on open
// keep-alive connections while the edge closes (Fastify already sets `Connection: close` on
// them), the request counter, and the requests in flight per connection (in-flight.ts).
// Callback hooks and one counter child per route and status: on the hot path, a promise per hook
// and a label lookup per request cost more than the work itself.

type Inc = () => void;

/** `counter.labels(route, status).inc`, looked up once per route and status. */
function countersByRouteAndStatus(counter: Counter<"route" | "status">) {
  const children = new Map<string, Inc>();
  return (route: string, status: number) => {
    const id = `${status} ${route}`;
    let inc = children.get(id);
    if (!inc) {
      const child = counter.labels({ route, status });
      inc = () => child.inc();
      children.set(id, inc);
    }
    inc();
  };
}

export const lifecycle = fp<{ metrics: EdgeMetrics }>(
  async (app, { metrics }) => {
    let closing = false;
    const count = countersByRouteAndStatus(metrics.requests);
    app.addHook("preClose", async () => {
      closing = true;
    });
    app.addHook("onRequest", (req, _reply, done) => {
      requestStarted(req.raw);
      done(closing ? unavailable("the service is shutting down", "shutting_down") : undefined);
    });
    app.addHook("onResponse", (req, reply, done) => {
      requestAnswered(req.raw);
      count(req.routeOptions.url ?? "unmatched", reply.statusCode);
      done();
    });
  },
  { name: "lifecycle" },
);
