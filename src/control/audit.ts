import { z } from "zod";
import { generateId } from "../keys/key-format.js";
import { KEY_STORE_PREFIX } from "../keys/key-store.js";
import type { RedisClient } from "../redis/connections.js";

// The audit log: every change the control plane makes, through HTTP or the CLI. An entry says
// when, who (a key id, or "cli" and the OS user), from where, the action, its target and what
// changed (before and after) — never a secret nor a whole key: keys are named by id and prefix.
//
// In Redis, beside the key store (so `headroom backup` carries it with the keys it speaks of):
//   {p}:audit              sorted set  every entry, scored by its time (ms)
//   {p}:audit:<project>    sorted set  the entries of one project
// A member is the entry's JSON, whose first field is its id: entries of one millisecond sort by
// id, so (time, id) orders the log and makes its cursor. Entries older than the retention
// (AUDIT_RETENTION_DAYS) are removed from a set whenever it is written or read.
//
// Bounded per project (AUDIT_MAX_ENTRIES_PER_PROJECT): a write past the bound drops the project's
// oldest entries, from its own set and from the whole log, so one tenant's writes hold at most
// that many entries of Redis and never push another project's (or the operator's) out of the
// whole log. Entries of no project are written by the CLI only (an admin key's making).
//
// A tenant reads its project's log through tenantView: an operator's entry (an admin key or the
// CLI) says "operator" and no more — not the OS user, the host, the admin key's id or address.

export const AUDIT_ID = /^aud_[0-9A-Za-z]{16}$/;

export const auditActor = z.object({
  /** A key's id for HTTP; null for the CLI. */
  key_id: z.string().nullable(),
  /** admin or manage for a key; cli for the command line. */
  kind: z.enum(["admin", "manage", "cli"]),
  /** The OS user, for the CLI. */
  user: z.string().optional(),
});

export const auditEntry = z.object({
  id: z.string().regex(AUDIT_ID),
  at: z.string(),
  actor: auditActor,
  /** The client's address (HTTP), or the host's name (CLI). */
  source: z.string(),
  action: z.string(),
  /** The project concerned; null for none (an admin key). */
  project: z.string().nullable(),
  /** What was acted on: a project id, a key id or a rule id. */
  target: z.string(),
  before: z.record(z.string(), z.unknown()).nullable(),
  after: z.record(z.string(), z.unknown()).nullable(),
});

/** An entry as a manage key reads it: the operator's actions say "operator", nothing more. */
export const auditView = auditEntry.extend({
  actor: auditActor.extend({ kind: z.enum(["admin", "manage", "cli", "operator"]) }),
  /** The client's address or the CLI's host; null for the operator, in a tenant's view. */
  source: z.string().nullable(),
});

export type AuditEntry = z.infer<typeof auditEntry>;
export type AuditView = z.infer<typeof auditView>;

/** An entry as its project's manage key sees it: its own keys' actions whole, the operator's not. */
export function tenantView(entry: AuditEntry): AuditView {
  if (entry.actor.kind === "manage") return entry;
  return { ...entry, actor: { key_id: null, kind: "operator" }, source: null };
}
export type AuditActor = z.infer<typeof auditActor>;
export type AuditInput = Omit<AuditEntry, "id" | "at">;

const DAY_MS = 86_400_000;

/** An audit entry read back, with its time (Unix ms): the cursor of the next page. */
export interface AuditRead {
  t: number;
  entry: AuditEntry;
}

/** The control plane's audit log in Redis (createAuditLog). */
export interface AuditLog {
  /** Its Redis keys: the whole log, and a project's. */
  keys: { all: string; ofProject: (project: string) => string };
  /** Writes an entry: to the whole log, and to its project's. */
  write(input: AuditInput): Promise<AuditEntry>;
  /**
   * Entries newest first, `limit` + 1 of them (the extra one says another page follows),
   * after the cursor's (time, id) when given.
   */
  read(q: {
    project?: string;
    limit: number;
    after?: { t: number; id: string };
  }): Promise<AuditRead[]>;
}

export function createAuditLog(
  redis: RedisClient,
  opts: {
    retentionDays: number;
    /** Entries one project's log keeps: past it the oldest go, from the whole log too. */
    maxPerProject?: number;
    now?: () => number;
    prefix?: string;
  },
): AuditLog {
  const now = opts.now ?? Date.now;
  const prefix = opts.prefix ?? KEY_STORE_PREFIX;
  const all = `${prefix}:audit`;
  const ofProject = (project: string) => `${prefix}:audit:${project}`;
  const horizon = () => now() - opts.retentionDays * DAY_MS;
  const prune = (key: string) => redis.zremrangebyscore(key, "-inf", `(${horizon()}`);

  /** Drops a project's oldest entries past `max`: from its set, then from the whole log. */
  async function trim(key: string, max: number) {
    const over = await redis.zrange(key, 0, -(max + 1));
    if (over.length === 0) return;
    // The whole log first: an entry still in its project's set is found again by the next trim.
    await redis.zrem(all, ...over);
    await redis.zrem(key, ...over);
  }

  return {
    keys: { all, ofProject },

    /** Writes an entry: to the whole log, and to its project's. */
    async write(input: AuditInput): Promise<AuditEntry> {
      const t = now();
      // The id first: the member's text then sorts by it within one millisecond.
      const entry: AuditEntry = { id: generateId("aud"), at: new Date(t).toISOString(), ...input };
      const member = JSON.stringify(auditEntry.parse(entry));
      const keys = input.project === null ? [all] : [all, ofProject(input.project)];
      // Different Cluster slots: sent together, not as one MULTI.
      await Promise.all(keys.map((key) => redis.zadd(key, t, member)));
      await Promise.all(keys.map(prune));
      if (input.project !== null && opts.maxPerProject !== undefined) {
        await trim(ofProject(input.project), opts.maxPerProject);
      }
      return entry;
    },

    /**
     * Entries newest first, `limit` + 1 of them (the extra one says another page follows),
     * after the cursor's (time, id) when given.
     */
    async read(q: {
      project?: string;
      limit: number;
      after?: { t: number; id: string };
    }): Promise<{ t: number; entry: AuditEntry }[]> {
      const key = q.project === undefined ? all : ofProject(q.project);
      await prune(key);
      const out: { t: number; entry: AuditEntry }[] = [];
      const max = q.after ? String(q.after.t) : "+inf";
      const batch = Math.max(q.limit + 1, 100);
      for (let offset = 0; out.length <= q.limit; offset += batch) {
        const rows = await redis.zrange(
          key,
          max,
          "-inf",
          "BYSCORE",
          "REV",
          "LIMIT",
          offset,
          batch,
          "WITHSCORES",
        );
        for (let i = 0; i < rows.length && out.length <= q.limit; i += 2) {
          const t = Number(rows[i + 1]);
          let entry: AuditEntry;
          try {
            entry = auditEntry.parse(JSON.parse(rows[i] as string));
          } catch {
            continue; // not an entry of ours: skipped, never fatal
          }
          // Entries of the cursor's own millisecond come after it only with a smaller id.
          if (q.after && t === q.after.t && entry.id >= q.after.id) continue;
          out.push({ t, entry });
        }
        if (rows.length < batch * 2) break;
      }
      return out;
    },
  };
}
