import type { z } from "zod";
import {
  type DeclaredLimit,
  type DeclaredPool,
  declaredLimitSchema,
  declaredPoolSchema,
  type ProjectDeclarations,
} from "../providers/declared-limit.js";
import type { RedisClient } from "../redis/connections.js";

// A project's declared limits and pools in Redis (docs/control-plane.md), under the queue prefix
// like the alert rules (one hash tag: the script below touches three keys):
//   <prefix>:declared:<project>   hash    limits → JSON list, pools → JSON list (absent: none)
//   <prefix>:declared-seq         string  the number of the latest change
//   <prefix>:declared-changes     zset    project → the number of its latest change
// Each write replaces one list and numbers the change in one script, so that a process holding
// declarations (declarations-cache.ts) asks only "what changed since n?" to stay current.

export interface DeclarationKeys {
  of: (project: string) => string;
  seq: string;
  changes: string;
}

export function declarationKeys(prefix: string): DeclarationKeys {
  return {
    of: (project) => `${prefix}:declared:${project}`,
    seq: `${prefix}:declared-seq`,
    changes: `${prefix}:declared-changes`,
  };
}

export type DeclarationField = keyof ProjectDeclarations;

export interface DeclarationsStore {
  /** The project's declarations and the bytes of JSON they were read from. */
  load(project: string): Promise<{ declarations: ProjectDeclarations; bytes: number }>;
  /** Replaces one list ([]: removes it) and numbers the change; answers the list it replaced. */
  replace<F extends DeclarationField>(
    project: string,
    field: F,
    items: ProjectDeclarations[F],
  ): Promise<ProjectDeclarations[F]>;
  /**
   * The projects changed after change `after` and the latest change's number; with null, none
   * and the latest number (where a reader starts).
   */
  changes(after: number | null): Promise<{ seq: number; projects: string[] }>;
}

// KEYS: the project's hash, the sequence, the change log. ARGV: field, JSON ('' removes it),
// project. Answers the field's value before (nil: none).
const REPLACE = `
local old = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1])
else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], n, ARGV[3])
return old
`;

const PARSERS = { limits: declaredLimitSchema, pools: declaredPoolSchema } as const;

/** A stored list; an entry that does not parse (edited by hand, a newer release's) is skipped. */
function parseList<F extends DeclarationField>(
  field: F,
  json: string | null | undefined,
): ProjectDeclarations[F] {
  if (!json) return [];
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return [];
  }
  if (!Array.isArray(raw)) return [];
  const schema: z.ZodType = PARSERS[field];
  const out: unknown[] = [];
  for (const item of raw) {
    const parsed = schema.safeParse(item);
    if (parsed.success) out.push(parsed.data);
  }
  return out as ProjectDeclarations[F];
}

/** A limit as stored and answered: `pool` always present (null: every pool of the model). */
export const normalLimit = (l: DeclaredLimit): DeclaredLimit => ({
  provider: l.provider,
  model: l.model,
  pool: l.pool ?? null,
  dimension: l.dimension,
  window: l.window,
  limit: l.limit,
});

export const normalPool = (p: DeclaredPool): DeclaredPool => ({
  provider: p.provider,
  label: p.label,
  apps: [...p.apps],
});

/** How many changes one read of the change log takes at most (it reads on until done). */
const CHANGES_PAGE = 1_000;

export function createDeclarationsStore(redis: RedisClient, prefix: string): DeclarationsStore {
  const k = declarationKeys(prefix);
  return {
    async load(project) {
      const hash = await redis.hgetall(k.of(project));
      return {
        declarations: {
          limits: parseList("limits", hash.limits),
          pools: parseList("pools", hash.pools),
        },
        bytes: (hash.limits?.length ?? 0) + (hash.pools?.length ?? 0),
      };
    },

    async replace(project, field, items) {
      const json = items.length === 0 ? "" : JSON.stringify(items);
      const old = (await redis.eval(
        REPLACE,
        3,
        k.of(project),
        k.seq,
        k.changes,
        field,
        json,
        project,
      )) as string | null;
      return parseList(field, old);
    },

    async changes(after) {
      if (after === null) return { seq: Number((await redis.get(k.seq)) ?? 0), projects: [] };
      const projects: string[] = [];
      let seq = after;
      for (;;) {
        const page = await redis.zrangebyscore(
          k.changes,
          `(${seq}`,
          "+inf",
          "WITHSCORES",
          "LIMIT",
          0,
          CHANGES_PAGE,
        );
        for (let i = 0; i < page.length; i += 2) {
          projects.push(page[i] as string);
          seq = Math.max(seq, Number(page[i + 1]));
        }
        if (page.length < CHANGES_PAGE * 2) return { seq, projects };
      }
    },
  };
}
