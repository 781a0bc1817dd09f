import type { FastifyPluginAsync } from "fastify";
import type { KeyLookup } from "../../keys/key-store.js";
import { parseQuery } from "../params.js";
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
  app.get("/api/v1/advice", async (req, reply) => {
    const q = parseQuery(adviceQuery, req.query);
    const { body, etag } = await deps.memory.answer(req.project as KeyLookup, q);
    reply
      .header("cache-control", CACHE_CONTROL)
      .header("etag", etag)
      .header("vary", "authorization");
    if (req.headers["if-none-match"] === etag) return reply.code(304).send();
    return reply.type("application/json; charset=utf-8").send(body);
  });
};
