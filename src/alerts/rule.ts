import { z } from "zod";
import { DIMENSION_NAME, MAX_DIMENSION_LENGTH, WINDOW_LENGTHS } from "../providers/window.js";

// An alert rule: which rows it watches (a project, optionally one provider, model and app), which
// figure (a dimension: requests, tokens, credits, input_tokens, or any a provider names, as % of
// the limit used) — in each window of that dimension
// the provider states, or only in windows of one length (`window`, e.g. 1d) — its warning and critical
// thresholds, how far usage must fall back before an alert resolves (hysteresis), how long the
// same alert stays quiet after it fired (cooldown), and where it is delivered.

/** The contract's three figures, each with its own columns (and burn unit). */
export const METRICS = ["requests", "tokens", "credits"] as const;
export type Metric = (typeof METRICS)[number];

/** The model of now's unit for a dimension: credits and requests are their own, the rest tokens. */
export const metricOfDimension = (dimension: string): Metric =>
  dimension === "requests" || dimension === "credits" ? dimension : "tokens";

/**
 * What a rule watches: a window dimension, one of the contract's three or any other a provider's
 * parser names (input_tokens, output_tokens, …). Bounded: lowercase snake case, ≤ 64 characters.
 */
export const ruleMetricSchema = z
  .string({ error: "must be a dimension name" })
  .max(MAX_DIMENSION_LENGTH, `must be at most ${MAX_DIMENSION_LENGTH} characters`)
  .regex(
    DIMENSION_NAME,
    "must be a dimension: requests, tokens, credits, input_tokens, output_tokens, or another in lowercase snake case",
  );

export const DEFAULT_HYSTERESIS_PCT = 5;
export const DEFAULT_COOLDOWN_S = 600;

const DURATION = /^(\d+)(s|m|h|d)?$/;
const UNIT_S = { s: 1, m: 60, h: 3_600, d: 86_400 } as const;

/** `90s`, `10m`, `2h`, `1d`, `0` → seconds; null when the text is not a duration. */
export function parseDuration(text: string): number | null {
  const m = DURATION.exec(text.trim());
  if (!m) return null;
  const unit = (m[2] ?? "s") as keyof typeof UNIT_S;
  return Number(m[1]) * UNIT_S[unit];
}

const pct = z.number().gt(0, "must be above 0").max(100, "must be at most 100");
const filter = z.string().trim().min(1).max(256).nullable().default(null);

/** What a person gives (CLI flags, after parsing): checked before anything is stored. */
export const ruleInputSchema = z
  .object({
    project: z.string().trim().min(1, "required").max(128),
    // The edge lowercases providers; a filter must match what is stored.
    provider: filter.transform((p) => p?.toLowerCase() ?? null),
    model: filter,
    app: filter,
    metric: ruleMetricSchema,
    window: z
      .enum(WINDOW_LENGTHS, { error: `must be one of ${WINDOW_LENGTHS.join(", ")}` })
      .nullable()
      .default(null),
    warn_pct: pct,
    critical_pct: pct,
    hysteresis_pct: z.number().min(0).max(50).default(DEFAULT_HYSTERESIS_PCT),
    cooldown_s: z
      .number()
      .min(0)
      .max(7 * 86_400)
      .default(DEFAULT_COOLDOWN_S),
    webhook: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
  })
  .refine((r) => r.warn_pct < r.critical_pct, {
    message: "the warning threshold must be below the critical one",
    path: ["warn_pct"],
  })
  .refine((r) => r.hysteresis_pct < r.warn_pct, {
    message: "the hysteresis must be below the warning threshold",
    path: ["hysteresis_pct"],
  });

export type RuleInput = z.input<typeof ruleInputSchema>;

/** A stored rule. Its signing secret is kept apart (rule-store.ts) and never travels with it. */
export const ruleSchema = z.object({
  id: z.string().regex(/^alr_[a-z0-9]+$/),
  project: z.string(),
  provider: z.string().nullable(),
  model: z.string().nullable(),
  app: z.string().nullable(),
  metric: ruleMetricSchema,
  /** Only windows of this length; null (and rules stored before windows): every window. */
  window: z.enum(WINDOW_LENGTHS).nullish(),
  warn_pct: z.number(),
  critical_pct: z.number(),
  hysteresis_pct: z.number(),
  cooldown_s: z.number(),
  webhook: z.string(),
  created_at: z.string(),
});

export type AlertRule = z.infer<typeof ruleSchema>;

export class RuleError extends Error {
  override name = "RuleError";
}

/** Validates a rule's input; the error names every bad field. */
export function parseRuleInput(input: RuleInput): z.output<typeof ruleInputSchema> {
  const parsed = ruleInputSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join(".") || "rule"}: ${i.message}`);
    throw new RuleError(`invalid rule: ${lines.join("; ")}`);
  }
  return parsed.data;
}
