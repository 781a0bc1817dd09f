import type { onResponseHookHandler } from "fastify";
import fp from "fastify-plugin";
import type { Counter } from "prom-client";
import { unavailable } from "../../http/errors.js";
import { requestAnswered, requestStarted } from "../../http/in-flight.js";
import type { EdgeMetrics } from "../metrics.js";

// Per-request work every route shares: the contract's 503 for requests that still arrive on open
// keep-alive connections while the edge closes (Fastify already sets `Connection: close` on
// them), the request counter, and the requests in flight per connection (in-flight.ts).
// Callback hooks, and each route counting its own answers with the counter's children for its
// statuses: on the hot path, a promise per hook, a label look-up or the route's options object
// per request cost more than the work itself.

type Count = (status: number) => void;

/** `counter.labels(route, status).inc()`, with one child per status looked up once. */
function countsOf(counter: Counter<"route" | "status">, route: string): Count {
  const children = new Map<number, () => void>();
  return (status) => {
    let inc = children.get(status);
    if (!inc) {
      const child = counter.labels({ route, status });
      inc = () => child.inc();
      children.set(status, inc);
    }
    inc();
  };
}

const asList = <T>(hooks: T | T[] | undefined): T[] =>
  hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];

export const lifecycle = fp<{ metrics: EdgeMetrics }>(
  async (app, { metrics }) => {
    let closing = false;
    const countUnmatched = countsOf(metrics.requests, "unmatched");
    app.addHook("preClose", async () => {
      closing = true;
    });
    app.addHook("onRequest", (req, _reply, done) => {
      requestStarted(req.raw);
      done(closing ? unavailable("the service is shutting down", "shutting_down") : undefined);
    });
    // Every route added after this plugin counts its answers under its own URL…
    app.addHook("onRoute", (route) => {
      const count = countsOf(metrics.requests, route.url);
      const counted: onResponseHookHandler = (_req, reply, done) => {
        count(reply.statusCode);
        done();
      };
      route.onResponse = [...asList(route.onResponse), counted];
    });
    // …and requests no route matched count as "unmatched".
    app.addHook("onResponse", (req, reply, done) => {
      requestAnswered(req.raw);
      if (req.is404) countUnmatched(reply.statusCode);
      done();
    });
  },
  { name: "lifecycle" },
);
