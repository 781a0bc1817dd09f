import { createHash } from "node:crypto";
import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import { ADVICE_REASONS, VERDICTS } from "../../headroom/advice.js";
import type { KeyLookup } from "../../keys/key-store.js";
import { POOL_LABEL } from "../../report/report-schema.js";
import { parseQuery, single } from "../params.js";
import type { AdviceMemory } from "../queries/advice.js";

// GET /api/v1/advice (docs/pools.md): may the caller spend `requests` and `tokens` on a model
// now — go, wait (with the binding window and the time to its reset, at the answer's moment) or
// unknown (with why) — judged by the model's pool, with the project's other pools that have room.
// Served from memory (queries/advice.ts); a read key or the project's report key may ask. An
// answer may be kept a second (Cache-Control), and carries an ETag.

/** The most requests or tokens one ask may name: far past any provider's window. */
export const MAX_ASK = 1e12;

const whole = single(
  z
    .string()
    .regex(/^\d{1,13}$/, "expected a whole number")
    .transform(Number)
    .pipe(z.number().min(0).max(MAX_ASK, `at most ${MAX_ASK}`)),
);

export const adviceQuery = z.strictObject({
  provider: single(
    z
      .string()
      .trim()
      .min(1)
      .max(64)
      .transform((p) => p.toLowerCase()),
  ),
  model: single(z.string().min(1).max(256)),
  app: single(z.string().trim().min(1).max(128)).optional(),
  /** A pool's id (12 hex digits, as /headroom gives it) or its label. */
  pool: single(z.string().regex(POOL_LABEL, "expected a pool id or label")).optional(),
  requests: whole.optional().transform((n) => n ?? 1),
  tokens: whole.optional().transform((n) => n ?? 0),
});

const judgedWindow = z.object({
  dimension: z.string(),
  window: z.string().nullable(),
  limit: z.number().nullable(),
  remaining: z.number().nullable(),
  resets_at: z.string().nullable(),
  reset_since_report: z.boolean(),
  needed: z.number(),
  room: z.boolean().nullable(),
});

export const adviceResponse = z.object({
  at: z.string(),
  verdict: z.enum(VERDICTS),
  reason: z.enum(ADVICE_REASONS).nullable(),
  /** From `at` to the binding window's reset, for `wait`. */
  retry_after_ms: z.number().nullable(),
  binding: judgedWindow.nullable(),
  pool: z
    .object({
      pool: z.string(),
      kind: z.string(),
      label: z.string().nullable(),
      members: z.array(z.string()),
    })
    .nullable(),
  windows: z.array(judgedWindow),
  alternatives: z.array(
    z.object({
      provider: z.string(),
      model: z.string().nullable(),
      pool: z.string(),
      label: z.string().nullable(),
      used_pct: z.number(),
    }),
  ),
});

/** An answer may be kept this long by a client (the client library's cache too). */
export const ADVICE_MAX_AGE_S = 1;

export const adviceRoutes: FastifyPluginAsync<{ memory: AdviceMemory }> = async (app, deps) => {
  app.get("/api/v1/advice", async (req, reply) => {
    const q = parseQuery(adviceQuery, req.query);
    const answer = await deps.memory.advise(req.project as KeyLookup, q);
    const body = JSON.stringify(answer);
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
    reply
      .header("cache-control", `private, max-age=${ADVICE_MAX_AGE_S}`)
      .header("etag", etag)
      .header("vary", "authorization");
    if (req.headers["if-none-match"] === etag) return reply.code(304).send();
    return reply.type("application/json; charset=utf-8").send(body);
  });
};
