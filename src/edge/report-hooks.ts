import type { FastifyReply, FastifyRequest } from "fastify";
import { type AuthDeps, createAuthenticate } from "../http/authenticate.js";
import { requireScope } from "../http/scope.js";
import type { KeyLookup } from "../keys/key-store.js";
import type { BodiesInFlight } from "./bytes-in-flight.js";
import type { WorkTurns } from "./work-turns.js";

/**
 * The hooks of a route that takes many reports in one body (a batch, an OTLP export): the key
 * first, then the body's declared size held for its project until the answer, then, the body read,
 * its turn at work (work-turns.ts). Its parsed body is `{ bytes }`.
 */
export function reportBodyHooks(
  deps: AuthDeps & { bodies: Pick<BodiesInFlight, "hold">; turns: Pick<WorkTurns, "take" | "end"> },
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
    preHandler: async (req: FastifyRequest, reply: FastifyReply) => {
      const bytes = (req.body as { bytes?: Buffer } | undefined)?.bytes?.length ?? 0;
      const turn = deps.turns.take(req, reply, (req.project as KeyLookup).projectId, bytes);
      if (turn === undefined || ((await turn) && !req.raw.socket.destroyed)) return;
      // Its client went away while it waited (or as its turn came): nothing of it is taken, and
      // no answer can reach it.
      deps.turns.end(req);
      reply.hijack();
    },
    onSend: async (req: FastifyRequest, _reply: FastifyReply, payload: unknown) => {
      // The work is done once its answer is made: what is left is its bytes.
      deps.turns.end(req);
      return payload;
    },
  };
}
