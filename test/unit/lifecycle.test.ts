import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { createEdgeMetrics, type EdgeMetrics } from "../../src/edge/metrics.js";
import { lifecycle } from "../../src/edge/plugins/lifecycle.js";
import { errorHandler } from "../../src/http/error-handler.js";
import { HttpError } from "../../src/http/errors.js";

// The request counter of every route: answers by route and status, "unmatched" for requests no
// route took, whatever hooks the route has of its own.

let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function counts(metrics: EdgeMetrics): Promise<Record<string, number>> {
  const { values } = await metrics.requests.get();
  return Object.fromEntries(values.map((v) => [`${v.labels.status} ${v.labels.route}`, v.value]));
}

describe("lifecycle: headroom_http_requests_total", () => {
  it("counts each answer under its route's URL and status, or as unmatched", async () => {
    const metrics = createEdgeMetrics();
    const server = Fastify();
    app = server;
    server.register(errorHandler);
    server.register(lifecycle, { metrics });
    server.register(async (scoped) => {
      scoped.post("/api/thing/:id", { onResponse: (_req, _reply, done) => done() }, async () => ({
        ok: true,
      }));
      scoped.get("/api/thing/:id", async () => {
        throw new HttpError("method_not_allowed", "use POST");
      });
    });
    await server.ready();
    for (const id of ["a", "b"]) await server.inject({ method: "POST", url: `/api/thing/${id}` });
    await server.inject({ method: "GET", url: "/api/thing/a" });
    await server.inject({ method: "GET", url: "/nowhere" });
    await server.inject({ method: "HEAD", url: "/api/thing/a" });
    expect(await counts(metrics)).toEqual({
      "200 /api/thing/:id": 2,
      "405 /api/thing/:id": 2,
      "404 unmatched": 1,
    });
  });
});
