import type { FastifyReply, FastifyRequest } from "fastify";
import { type AuthDeps, createAuthenticate } from "../http/authenticate.js";
import { requireScope } from "../http/scope.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { BodiesInFlight } from "./bytes-in-flight.js";

/**
 * The hooks of a route that takes many reports in one body (a batch, an OTLP export): the key
 * first, then the body's declared size held for its project until the answer.
 */
export function reportBodyHooks(
  deps: AuthDeps & { bodies: Pick<BodiesInFlight, "hold"> },
  bodyLimit: number,
) {
  const authenticate = createAuthenticate(deps);
  return {
    onRequest: async (req: FastifyRequest, reply: FastifyReply) => {
      reply.header("x-request-id", req.id);
      const project = await authenticate(req);
      // Before any limit: a read key spends nothing and stores nothing.
      requireScope(project, "report");
      req.project = project;
    },
    preParsing: async (req: FastifyRequest, reply: FastifyReply) => {
      // The declared size (413 over the limit), held for the project until the answer.
      deps.bodies.hold(req, reply, (req.project as KeyLookup).projectId, bodyLimit);
    },
  };
}
