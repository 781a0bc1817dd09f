import { z } from "zod";
import { ruleMetricSchema, ruleSchema } from "../alerts/rule.js";
import {
  type DeclaredLimit,
  type DeclaredPool,
  declaredLimitSchema,
  declaredPoolSchema,
} from "../providers/declared-limit.js";
import { WINDOW_LENGTHS } from "../providers/window.js";
import { HttpError } from "../http/errors.js";
import { auditView } from "./audit.js";

// The control plane's shapes, one zod schema each: the HTTP routes validate bodies with them, the
// service's answers are typed from them, and the OpenAPI document is generated from them.

/** A body checked against its schema: its data, or the contract's 400 with every issue. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({
    path: i.path.join(".") || "body",
    message: i.message,
  }));
  throw new HttpError("invalid_body", issues.map((i) => `${i.path}: ${i.message}`).join("; "), {
    issues,
  });
}

const projectId = z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "1-64 of letters, digits, . _ -");

export const overridesBody = z.strictObject({
  /** Reports per calendar month; null: no monthly quota. */
  monthly: z.number().int().positive().nullable().optional(),
  burst: z.number().int().positive().optional(),
  capacity: z.number().int().positive().optional(),
});

export const createProjectBody = z.strictObject({
  project: projectId,
  /** A plan of PLANS; DEFAULT_PLAN when not given. */
  plan: z.string().min(1).max(64).optional(),
  overrides: overridesBody.optional(),
});

export const setPlanBody = z.strictObject({
  plan: z.string().min(1).max(64),
  /** Overrides not given are reset when the plan changes, kept when it stays. */
  overrides: overridesBody.optional(),
});

/** Keys made over HTTP: never admin keys (the CLI's `keys create --scope admin` makes those). */
export const createKeyBody = z.strictObject({
  scope: z.enum(["report", "read", "manage"]).default("report"),
});

/** The longest a rotated-out secret keeps working: 30 days, over HTTP and from the CLI alike. */
export const MAX_OVERLAP_S = 30 * 86_400;

export const rotateKeyBody = z.strictObject({
  /** How long the old secret keeps working; 0: refused at once. */
  expires_in_s: z
    .number()
    .int()
    .min(0)
    .max(MAX_OVERLAP_S, `at most ${MAX_OVERLAP_S} s (30 days)`)
    .default(86_400),
});

const filter = z.string().min(1).max(256).nullable().optional();

/** A rule's fields; its project is the URL's. */
export const ruleBody = z.strictObject({
  provider: filter,
  model: filter,
  app: filter,
  /** A dimension: requests, tokens, credits, input_tokens, … (lowercase snake case, ≤ 64). */
  metric: ruleMetricSchema,
  /** Only the provider's windows of this length; null or absent: every window. */
  window: z.enum(WINDOW_LENGTHS).nullable().optional(),
  warn_pct: z.number(),
  critical_pct: z.number(),
  hysteresis_pct: z.number().optional(),
  cooldown_s: z.number().optional(),
  webhook: z.string().max(2048),
});

export const projectView = z.object({
  project: z.string(),
  plan: z.string(),
  overrides: overridesBody,
  created_at: z.string().nullable(),
});

export const projectList = z.object({ items: z.array(projectView) });

export const keyView = z.object({
  key_id: z.string(),
  /** null for an admin key, which belongs to no project. */
  project: z.string().nullable(),
  scope: z.enum(["report", "read", "manage", "admin"]),
  /** The prefix of the key's secret (hr_, hrr_, hrm_, hra_): never more of it. */
  prefix: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  rotated_at: z.string().nullable(),
  revoked: z.boolean(),
});

export const keyList = z.object({ items: z.array(keyView) });

/** The one answer that holds a key's secret: store it, it is not shown again. */
export const createdKey = keyView.extend({ key: z.string(), plan: z.string() });

export const rotatedKey = keyView.extend({
  key: z.string(),
  /** Until when the old secret works (then it is refused as revoked). */
  old_key_expires_at: z.string(),
});

export const revokedKey = z.object({ key_id: z.string(), revoked: z.literal(true) });

export const ruleView = ruleSchema;
export const ruleList = z.object({ items: z.array(ruleSchema) });
/** The one answer that holds a rule's signing secret. */
export const createdRule = ruleSchema.extend({ secret: z.string() });
export const removedRule = z.object({ id: z.string(), removed: z.literal(true) });

export const testSent = z.object({
  id: z.string(),
  webhook: z.string(),
  status: z.number().nullable(),
  ok: z.boolean(),
  error: z.string().optional(),
});

export const auditQuery = z.strictObject({
  project: projectId.optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, "not a cursor")
    .optional(),
});

export const auditPage = z.object({
  /** A manage key's view names the operator's actions "operator" only (audit.ts, tenantView). */
  items: z.array(auditView),
  next_cursor: z.string().nullable(),
});

/** A project's declared limits, at most; its pools, at most; apps across its pools, at most. */
export const MAX_DECLARED_LIMITS = 200;
export const MAX_DECLARED_POOLS = 100;
export const MAX_DECLARED_POOL_APPS = 1_000;

/** What makes two declared limits the same one: both would state one window. */
export const declaredLimitKey = (l: DeclaredLimit) =>
  JSON.stringify([l.provider, l.model, l.pool ?? null, l.dimension, l.window]);

/** The whole set of a project's declared limits (PUT replaces it; [] clears it). */
export const declaredLimitsBody = z
  .strictObject({ limits: z.array(declaredLimitSchema).max(MAX_DECLARED_LIMITS) })
  .superRefine(({ limits }, ctx) => {
    const seen = new Map<string, number>();
    limits.forEach((l, i) => {
      const key = declaredLimitKey(l);
      const first = seen.get(key);
      if (first === undefined) seen.set(key, i);
      else {
        ctx.addIssue({
          code: "custom",
          path: ["limits", i],
          message: `the same provider, model, pool, dimension and window as limits.${first}`,
        });
      }
    });
  });

/** The whole set of a project's declared pools (PUT replaces it; [] clears it). */
export const declaredPoolsBody = z
  .strictObject({ pools: z.array(declaredPoolSchema).max(MAX_DECLARED_POOLS) })
  .superRefine(({ pools }, ctx) => {
    // provider → app → the pool that has it; provider → label → the pool's index.
    const apps = new Map<string, Map<string, number>>();
    const labels = new Map<string, number>();
    let members = 0;
    pools.forEach((pool, i) => {
      const label = JSON.stringify([pool.provider, pool.label]);
      const sameLabel = labels.get(label);
      if (sameLabel !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["pools", i, "label"],
          message: `pools.${sameLabel} is ${pool.provider}'s pool ${pool.label} already`,
        });
      } else labels.set(label, i);
      const ofProvider = apps.get(pool.provider) ?? new Map<string, number>();
      apps.set(pool.provider, ofProvider);
      pool.apps.forEach((app, j) => {
        const other = ofProvider.get(app);
        if (other === undefined) ofProvider.set(app, i);
        else {
          ctx.addIssue({
            code: "custom",
            path: ["pools", i, "apps", j],
            message:
              other === i
                ? `${app} is listed twice`
                : `${app} is in ${pool.provider}'s pool pools.${other} already: an app draws on one pool of a provider`,
          });
        }
      });
      members += pool.apps.length;
    });
    if (members > MAX_DECLARED_POOL_APPS) {
      ctx.addIssue({
        code: "custom",
        path: ["pools"],
        message: `${members} apps across the pools: at most ${MAX_DECLARED_POOL_APPS}`,
      });
    }
  });

export const declaredLimitsView = z.object({ limits: z.array(declaredLimitSchema) });
export const declaredPoolsView = z.object({ pools: z.array(declaredPoolSchema) });
export type DeclaredLimitsView = { limits: DeclaredLimit[] };
export type DeclaredPoolsView = { pools: DeclaredPool[] };

export type KeyView = z.infer<typeof keyView>;
export type ProjectView = z.infer<typeof projectView>;
