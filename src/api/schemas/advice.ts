import { z } from "zod";
import { ADVICE_REASONS, VERDICTS } from "../../headroom/advice.js";
import { POOL_LABEL } from "../../report/report-schema.js";
import { single } from "../params.js";

// GET /api/v1/advice: what it is asked and what it answers (the route: routes/advice.ts, the
// memory it is served from: queries/advice.ts, the OpenAPI document: openapi.ts).

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
