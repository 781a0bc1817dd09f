import type { DeclarationsReader, ProjectDeclarations } from "../providers/declared-limit.js";
import type { RedisClient } from "../redis/connections.js";
import { createDeclarationsStore, type DeclarationsStore } from "./declarations-store.js";

// Declarations as the workers and the read side use them: held per process, asked of Redis once
// per project, and read again when the store's change log names the project (polled at most once
// per `checkMs`, one command) or after `ttlMs` at the latest (a restore writes no change log).
// Bounded: at most `maxProjects` projects and `maxBytes` bytes of their JSON, the least recently
// asked ones dropped first, so no number of tenants (nor one tenant's largest set) grows it.

export interface DeclarationsCacheOptions {
  /** A change is seen within this (ms). */
  checkMs?: number;
  /** A project's declarations are read again at least this often (ms). */
  ttlMs?: number;
  maxProjects?: number;
  /** Bytes of stored JSON held, at most (one project's largest set is about 135 KB). */
  maxBytes?: number;
  now?: () => number;
}

export const DECLARATIONS_CACHE_DEFAULTS = {
  checkMs: 1_000,
  ttlMs: 60_000,
  maxProjects: 10_000,
  maxBytes: 16 * 1024 * 1024,
} as const;

/** What one entry costs beyond its JSON: a map slot, its key and a small object. */
const ENTRY_OVERHEAD = 200;

interface Entry {
  value: ProjectDeclarations;
  until: number;
  bytes: number;
}

export function createCachedDeclarations(
  store: Pick<DeclarationsStore, "load" | "changes">,
  opts: DeclarationsCacheOptions = {},
): DeclarationsReader {
  const o = { ...DECLARATIONS_CACHE_DEFAULTS, ...opts };
  const now = opts.now ?? Date.now;
  /** In use order: the first is the least recently asked. */
  const held = new Map<string, Entry>();
  let bytes = 0;
  /** Loads under way; `stale` once a change was seen while it ran (its answer is not kept). */
  const loading = new Map<string, { promise: Promise<ProjectDeclarations>; stale: boolean }>();
  let seq: number | null = null;
  let checkedAt = Number.NEGATIVE_INFINITY;
  let checking: Promise<void> | null = null;

  function drop(project: string) {
    const entry = held.get(project);
    if (!entry) return;
    held.delete(project);
    bytes -= entry.bytes;
  }

  function keep(project: string, value: ProjectDeclarations, size: number) {
    drop(project);
    const entry = { value, until: now() + o.ttlMs, bytes: size + ENTRY_OVERHEAD };
    held.set(project, entry);
    bytes += entry.bytes;
    for (const oldest of held.keys()) {
      if (held.size <= o.maxProjects && bytes <= o.maxBytes) break;
      drop(oldest);
    }
  }

  async function check(): Promise<void> {
    const changed = await store.changes(seq);
    seq = changed.seq;
    for (const project of changed.projects) {
      drop(project);
      const load = loading.get(project);
      if (load) load.stale = true;
    }
  }

  /** Reads the change log when it is due; one read at a time. */
  function checkIfDue(): Promise<void> | undefined {
    if (checking) return checking;
    if (now() - checkedAt < o.checkMs) return undefined;
    checkedAt = now();
    checking = check()
      .catch((err: unknown) => {
        // The first read failed: the next ask tries again rather than waiting `checkMs`.
        if (seq === null) checkedAt = Number.NEGATIVE_INFINITY;
        throw err;
      })
      .finally(() => {
        checking = null;
      });
    return checking;
  }

  function load(project: string): Promise<ProjectDeclarations> {
    const running = loading.get(project);
    if (running) return running.promise;
    const state = {
      stale: false,
      promise: store.load(project).then(
        ({ declarations, bytes: size }) => {
          loading.delete(project);
          if (!state.stale) keep(project, declarations, size);
          return declarations;
        },
        (err: unknown) => {
          loading.delete(project);
          throw err;
        },
      ),
    };
    loading.set(project, state);
    return state.promise;
  }

  return {
    async forProject(projectId) {
      const due = checkIfDue();
      // The first check (seq unknown) must finish before anything is held; later ones need not.
      if (due && seq === null) await due;
      else due?.catch(() => undefined);
      const entry = held.get(projectId);
      if (entry && entry.until > now()) {
        // Most recently asked: last in the map's order.
        held.delete(projectId);
        held.set(projectId, entry);
        return entry.value;
      }
      try {
        return await load(projectId);
      } catch (err) {
        // Redis away: the last known declarations, if any, rather than none.
        if (entry) return entry.value;
        throw err;
      }
    },
  };
}

/** The declarations of a deployment's Redis, cached in this process (see above). */
export function createDeclarationsReader(
  redis: RedisClient,
  prefix: string,
  opts: DeclarationsCacheOptions = {},
): DeclarationsReader {
  return createCachedDeclarations(createDeclarationsStore(redis, prefix), opts);
}
