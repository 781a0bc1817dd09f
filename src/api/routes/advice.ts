import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { parseQuery } from "../params.js";
import type { AdviceAnswer } from "../advice-answers.js";
import type { AdviceMemory } from "../queries/advice.js";
import { adviceQuery } from "../schemas/advice.js";

// GET /api/v1/advice (docs/pools.md): may the caller spend `requests` and `tokens` on a model
// now — go, wait (with the binding window and the time to its reset, at the answer's moment) or
// unknown (with why) — judged by the model's pool, with the project's other pools that have room.
// Served from memory (queries/advice.ts), an answer shared by the asks of its second; a read key
// or the project's report key may ask. An answer may be kept a second (Cache-Control), and
// carries an ETag.

/** An answer may be kept this long by a client (the client library's cache too). */
export const ADVICE_MAX_AGE_S = 1;

const CACHE_CONTROL = `private, max-age=${ADVICE_MAX_AGE_S}`;

export const adviceRoutes: FastifyPluginAsync<{ memory: AdviceMemory }> = async (app, deps) => {
  const send = (req: FastifyRequest, reply: FastifyReply, { body, etag }: AdviceAnswer): void => {
    reply
      .header("cache-control", CACHE_CONTROL)
      .header("etag", etag)
      .header("vary", "authorization");
    if (req.headers["if-none-match"] === etag) reply.code(304).send();
    else reply.type("application/json; charset=utf-8").send(body);
  };
  // Not async: an answer from a held copy is sent without a promise (sent, the handler returns
  // nothing; Fastify sends nothing more).
  app.get("/api/v1/advice", (req, reply) => {
    const q = parseQuery(adviceQuery, req.query);
    const answer = deps.memory.answer(req.project as KeyLookup, q);
    if (answer instanceof Promise) return answer.then((a) => send(req, reply, a));
    send(req, reply, answer);
  });
};
