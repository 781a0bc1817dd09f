import type { DeclaredLimit, DeclaredPool } from "../providers/declared-limit.js";
import type { AuditInput } from "./audit.js";
import { type DeclarationsStore, normalLimit, normalPool } from "./declarations-store.js";
import {
  type DeclaredLimitsView,
  type DeclaredPoolsView,
  declaredLimitsBody,
  declaredPoolsBody,
  parseBody,
} from "./schemas.js";

// What a project declares (docs/control-plane.md, "Declared limits and pools"): read and replaced
// whole, by an admin or the project's manage key, through HTTP or the CLI alike. The control
// service (service.ts) gives who may and how the audit log is written; this module checks the
// body and says in the audit log what changed.

/** One side of an audit entry shows changed entries up to this many bytes of JSON, then counts. */
export const AUDIT_SIDE_BYTES = 4_096;

export interface DeclarationsActions<P> {
  getLimits(p: P, project: string): Promise<DeclaredLimitsView>;
  /** Replaces the project's declared limits with the body's (`{"limits": []}` clears them). */
  setLimits(p: P, project: string, body: unknown): Promise<DeclaredLimitsView>;
  getPools(p: P, project: string): Promise<DeclaredPoolsView>;
  /** Replaces the project's declared pools with the body's (`{"pools": []}` clears them). */
  setPools(p: P, project: string, body: unknown): Promise<DeclaredPoolsView>;
}

export interface DeclarationsDeps<P> {
  store: DeclarationsStore;
  /** Refuses `p` unless it may manage `project`, and a project that does not exist. */
  mayManage(p: P, project: string): Promise<void>;
  audit(p: P, entry: Omit<AuditInput, "actor" | "source">): Promise<unknown>;
}

/** Entries of `a` not in `b`, counting repeats (JSON text as the identity). */
function minus<T>(a: readonly T[], b: readonly T[]): T[] {
  const left = new Map<string, number>();
  for (const x of b) {
    const k = JSON.stringify(x);
    left.set(k, (left.get(k) ?? 0) + 1);
  }
  return a.filter((x) => {
    const k = JSON.stringify(x);
    const n = left.get(k) ?? 0;
    if (n > 0) left.set(k, n - 1);
    return n === 0;
  });
}

/** The first entries within AUDIT_SIDE_BYTES, and how many were left out. */
function bounded<T>(items: T[]): { shown: T[]; more: number } {
  const shown: T[] = [];
  let size = 0;
  for (const item of items) {
    size += JSON.stringify(item).length + 1;
    if (size > AUDIT_SIDE_BYTES) break;
    shown.push(item);
  }
  return { shown, more: items.length - shown.length };
}

/** An audit entry's before and after: the counts, and what left and what came (bounded). */
export function declarationChange<T>(before: readonly T[], after: readonly T[]) {
  const removed = bounded(minus(before, after));
  const added = bounded(minus(after, before));
  return {
    before: {
      count: before.length,
      removed: removed.shown,
      ...(removed.more > 0 ? { removed_not_shown: removed.more } : {}),
    },
    after: {
      count: after.length,
      added: added.shown,
      ...(added.more > 0 ? { added_not_shown: added.more } : {}),
    },
  };
}

export function declarationsActions<P>(deps: DeclarationsDeps<P>): DeclarationsActions<P> {
  // Read when used: a control service of fake stores (unit tests) may have none.
  const store = () => deps.store;

  async function replace<T extends DeclaredLimit | DeclaredPool>(
    p: P,
    project: string,
    field: "limits" | "pools",
    items: T[],
  ): Promise<void> {
    const before = (await store().replace(project, field, items as never)) as T[];
    if (JSON.stringify(before) === JSON.stringify(items)) return;
    await deps.audit(p, {
      action: field === "limits" ? "declared_limits.set" : "declared_pools.set",
      project,
      target: project,
      ...declarationChange(before, items),
    });
  }

  return {
    async getLimits(p, project) {
      await deps.mayManage(p, project);
      return { limits: (await store().load(project)).declarations.limits.map(normalLimit) };
    },

    async setLimits(p, project, body) {
      await deps.mayManage(p, project);
      const limits = parseBody(declaredLimitsBody, body).limits.map(normalLimit);
      await replace(p, project, "limits", limits);
      return { limits };
    },

    async getPools(p, project) {
      await deps.mayManage(p, project);
      return { pools: (await store().load(project)).declarations.pools.map(normalPool) };
    },

    async setPools(p, project, body) {
      await deps.mayManage(p, project);
      const pools = parseBody(declaredPoolsBody, body).pools.map(normalPool);
      await replace(p, project, "pools", pools);
      return { pools };
    },
  };
}
