import { InvalidArgumentError } from "commander";
import {
  type DeclaredLimit,
  type DeclaredPool,
  declaredLimitSchema,
  declaredPoolSchema,
} from "../providers/declared-limit.js";

// `--limit` and `--pool` of `headroom limits|pools set`, read and checked as they are parsed (a
// bad one is a usage error naming the option, before any connection), each repeatable.

const explain = (issues: { path: PropertyKey[]; message: string }[]) =>
  issues.map((i) => `${i.path.map(String).join(".") || "value"}: ${i.message}`).join("; ");

/**
 * `provider/model[#pool]:dimension:window=N`, e.g. `bedrock/anthropic.claude-3-haiku:requests:1m=60`.
 * Read from the right, since a model's name may hold `/` and `:` (`…-v1:0`); a pool's label
 * never holds `#`, nor does a model's name.
 */
export function limitFlag(text: string, previous: DeclaredLimit[] = []): DeclaredLimit[] {
  const m = /^([^/]+)\/(.+?)(?:#([^#:]+))?:([^:]+):([^:=]+)=([^=]*)$/.exec(text.trim());
  if (!m) {
    throw new InvalidArgumentError(
      "Use provider/model[#pool]:dimension:window=limit, e.g. bedrock/anthropic.claude-3-haiku:requests:1m=60.",
    );
  }
  const [, provider, model, pool, dimension, window, limit] = m;
  const parsed = declaredLimitSchema.safeParse({
    provider,
    model,
    pool: pool ?? null,
    dimension,
    window,
    limit: /^\d+$/.test(limit ?? "") ? Number(limit) : limit,
  });
  if (!parsed.success) throw new InvalidArgumentError(explain(parsed.error.issues));
  return [...previous, parsed.data];
}

/** `provider:label=app,app…`, e.g. `openai:openai-prod=chat,agent`. */
export function poolFlag(text: string, previous: DeclaredPool[] = []): DeclaredPool[] {
  const m = /^([^:=]+):([^=]+)=(.*)$/.exec(text.trim());
  if (!m) {
    throw new InvalidArgumentError(
      "Use provider:label=app,app…, e.g. openai:openai-prod=chat,agent.",
    );
  }
  const [, provider, label, apps] = m;
  const parsed = declaredPoolSchema.safeParse({
    provider,
    label,
    apps: (apps ?? "").split(",").map((a) => a.trim()),
  });
  if (!parsed.success) throw new InvalidArgumentError(explain(parsed.error.issues));
  return [...previous, parsed.data];
}
