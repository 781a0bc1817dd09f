import { z } from "zod";
import { WINDOW_LENGTHS } from "./window.js";

// What a project declares for providers that state nothing (docs/providers.md): a limit per
// provider and model (and pool), as the provider's console shows it, and the pools its apps
// share when their clients name neither an account nor a pool (docs/pools.md). One schema each:
// the control plane validates bodies with them, the read side and the workers are typed from them.

/** 1-64 of the characters a pool label, app or model name may use in a key or a path. */
const name = z.string().regex(/^[A-Za-z0-9._:/@-]{1,64}$/, "1-64 of A-Z a-z 0-9 . _ : / @ -");
const provider = z.string().regex(/^[a-z0-9_-]{1,32}$/, "1-32 of a-z 0-9 _ -");

export const declaredLimitSchema = z.strictObject({
  provider,
  model: name,
  /** The pool's label this limit is for; absent or null: every pool of the model. */
  pool: name.nullable().optional(),
  dimension: z.enum(["requests", "tokens", "input_tokens", "output_tokens"]),
  window: z.enum(WINDOW_LENGTHS),
  limit: z.number().int().positive().max(1e12),
});
export type DeclaredLimit = z.infer<typeof declaredLimitSchema>;

export const declaredPoolSchema = z.strictObject({
  provider,
  /** The pool's label, as a client would send it in `pool`. */
  label: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "1-64 of A-Z a-z 0-9 . _ -"),
  /** The apps whose reports of this provider draw on the pool (1-100). */
  apps: z.array(name).min(1).max(100),
});
export type DeclaredPool = z.infer<typeof declaredPoolSchema>;

/** What a project declared, read by the workers and the read side (cached where they keep it). */
export interface ProjectDeclarations {
  limits: DeclaredLimit[];
  pools: DeclaredPool[];
}

export interface DeclarationsReader {
  /** The project's declarations; none declared: both lists empty. */
  forProject(projectId: string): Promise<ProjectDeclarations>;
}

/**
 * The declared limits that apply to a series or pool: its provider's and model's, for every pool
 * or for its label; one declared for its label wins over one for every pool.
 */
export function declaredFor(
  declarations: ProjectDeclarations,
  s: { provider: string; model: string; label: string | null },
): DeclaredLimit[] {
  const mine = declarations.limits.filter(
    (l) =>
      l.provider === s.provider &&
      l.model === s.model &&
      (l.pool == null || (s.label !== null && l.pool === s.label)),
  );
  // Later entries win in composeWindows: a label's own after those of every pool.
  return [...mine.filter((l) => l.pool == null), ...mine.filter((l) => l.pool != null)];
}
