import { z } from "zod";
import type { Plan } from "../config.js";
import type { RedisClient } from "../redis/connections.js";
import { generateId, generateKey, hashKey, isWellFormedKey, type Scope } from "./key-format.js";

// Projects and their keys in Redis. Only SHA-256 hashes of keys are stored.
//   {p}:key:<sha256>          hash  key_id, project_id, created_at, revoked, revoked_at?, scope?
//   {p}:key-id:<key_id>       string <sha256>
//   {p}:project:<project_id>  hash  plan, monthly?, burst?, capacity?, created_at,
//                                   plan_updated_at (a restore's merge keeps later plan changes)
//   {p}:project-keys:<id>     set   key ids
//   {p}:projects              set   project ids

export interface KeyInfo {
  keyId: string;
  projectId: string;
  createdAt: string;
  revoked: boolean;
  scope: Scope;
}

export interface ProjectInfo {
  projectId: string;
  plan: string;
  /** Per-project overrides of the plan's numbers. */
  overrides: Partial<Plan>;
}

/** What the edge needs to know about a presented key. */
export interface KeyLookup {
  keyId: string;
  projectId: string;
  scope: Scope;
  plan: string;
  overrides: Partial<Plan>;
}

/** The plan numbers a project may override, as stored in its hash. */
export const OVERRIDES = ["monthly", "burst", "capacity"] as const;

const overridesSchema = z
  .object({
    monthly: z.number().int().positive().nullable(),
    burst: z.number().int().positive(),
    capacity: z.number().int().positive(),
  })
  .partial()
  .strict();

function positive(text: string | undefined): number | undefined {
  const n = Number(text);
  return text && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

export class KeyStoreError extends Error {
  override name = "KeyStoreError";
}

const PROJECT_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** Where projects and keys live, whatever the queue prefix. */
export const KEY_STORE_PREFIX = "headroom";

export function createKeyStore(redis: RedisClient, prefix = KEY_STORE_PREFIX) {
  const k = {
    key: (hash: string) => `${prefix}:key:${hash}`,
    keyId: (id: string) => `${prefix}:key-id:${id}`,
    project: (id: string) => `${prefix}:project:${id}`,
    projectKeys: (id: string) => `${prefix}:project-keys:${id}`,
    projects: `${prefix}:projects`,
  };

  function checkProjectId(projectId: string) {
    if (!PROJECT_ID.test(projectId)) {
      throw new KeyStoreError("project id: 1-64 characters of letters, digits, '.', '_' or '-'");
    }
  }

  async function getProject(projectId: string): Promise<ProjectInfo | null> {
    const h = await redis.hgetall(k.project(projectId));
    if (!h.plan) return null;
    // A value that is not a positive whole number is no override (the plan's number applies).
    const overrides: Partial<Plan> = {};
    const monthly = h.monthly === "none" ? null : positive(h.monthly);
    if (monthly !== undefined) overrides.monthly = monthly;
    const burst = positive(h.burst);
    if (burst !== undefined) overrides.burst = burst;
    const capacity = positive(h.capacity);
    if (capacity !== undefined) overrides.capacity = capacity;
    return { projectId, plan: h.plan, overrides };
  }

  async function ensureProject(projectId: string, plan: string | undefined, defaultPlan: string) {
    checkProjectId(projectId);
    const created = await redis.hsetnx(k.project(projectId), "plan", plan ?? defaultPlan);
    const now = new Date().toISOString();
    if (created) {
      await redis.hset(k.project(projectId), { created_at: now, plan_updated_at: now });
    } else if (plan && (await redis.hget(k.project(projectId), "plan")) !== plan) {
      // A new plan, as with setPlan: the old plan's overrides go.
      await redis
        .multi()
        .hset(k.project(projectId), { plan, plan_updated_at: now })
        .hdel(k.project(projectId), ...OVERRIDES)
        .exec();
    }
    await redis.sadd(k.projects, projectId);
  }

  async function store(key: string, projectId: string, scope: Scope): Promise<KeyInfo> {
    const hash = hashKey(key);
    const info: KeyInfo = {
      keyId: generateId("key"),
      projectId,
      createdAt: new Date().toISOString(),
      revoked: false,
      scope,
    };
    const added = await redis.hsetnx(k.key(hash), "key_id", info.keyId);
    if (!added) throw new KeyStoreError("this key is already registered");
    // Sent together, not as MULTI or one pipeline: these keys live in different Cluster slots.
    await Promise.all([
      redis.hset(k.key(hash), {
        project_id: projectId,
        created_at: info.createdAt,
        revoked: "0",
        scope,
      }),
      redis.set(k.keyId(info.keyId), hash),
      redis.sadd(k.projectKeys(projectId), info.keyId),
    ]);
    return info;
  }

  async function keyInfo(hash: string): Promise<KeyInfo | null> {
    const h = await redis.hgetall(k.key(hash));
    if (!h.key_id || !h.project_id) return null;
    return {
      keyId: h.key_id,
      projectId: h.project_id,
      createdAt: h.created_at ?? "",
      revoked: h.revoked === "1",
      // Keys stored before scopes existed have none: they are report keys.
      scope: h.scope === "read" ? "read" : "report",
    };
  }

  return {
    /** Creates a key for a project (creating the project if needed); the plaintext is returned once. */
    async create(projectId: string, opts: { plan?: string; defaultPlan: string; scope?: Scope }) {
      await ensureProject(projectId, opts.plan, opts.defaultPlan);
      const scope = opts.scope ?? "report";
      const key = generateKey(scope);
      const info = await store(key, projectId, scope);
      const project = await getProject(projectId);
      return { key, ...info, plan: project?.plan ?? opts.defaultPlan };
    },

    /** Registers an existing key (any well-formed format) for a project. */
    async import(projectId: string, key: string, opts: { plan?: string; defaultPlan: string }) {
      if (!isWellFormedKey(key)) throw new KeyStoreError("the key is not well formed");
      await ensureProject(projectId, opts.plan, opts.defaultPlan);
      const info = await store(key, projectId, "report");
      const project = await getProject(projectId);
      return { ...info, plan: project?.plan ?? opts.defaultPlan };
    },

    async revoke(keyId: string): Promise<boolean> {
      const hash = await redis.get(k.keyId(keyId));
      if (!hash) return false;
      await redis.hset(k.key(hash), { revoked: "1", revoked_at: new Date().toISOString() });
      return true;
    },

    /**
     * Puts a project on `plan`. Moving to another plan drops the overrides not given with it
     * (they were chosen for the old plan); staying on the same plan keeps them. Returns the
     * project as stored, so the caller can show which overrides remain.
     */
    async setPlan(
      projectId: string,
      plan: string,
      overrides: Partial<Plan> = {},
    ): Promise<ProjectInfo> {
      checkProjectId(projectId);
      const checked = overridesSchema.safeParse(overrides);
      if (!checked.success) {
        const issue = checked.error.issues[0];
        throw new KeyStoreError(`${issue?.path.join(".")}: ${issue?.message}`);
      }
      const current = await getProject(projectId);
      if (!current) throw new KeyStoreError(`unknown project ${projectId}`);
      const fields: Record<string, string> = { plan, plan_updated_at: new Date().toISOString() };
      const dropped: string[] = [];
      for (const name of OVERRIDES) {
        const value = checked.data[name];
        if (value !== undefined) fields[name] = String(value ?? "none");
        else if (current.plan !== plan) dropped.push(name);
      }
      // One key: the change and the reset are applied together.
      const tx = redis.multi().hset(k.project(projectId), fields);
      if (dropped.length > 0) tx.hdel(k.project(projectId), ...dropped);
      await tx.exec();
      return (await getProject(projectId)) ?? { projectId, plan, overrides: {} };
    },

    getProject,

    async list(projectId?: string) {
      const projects = projectId ? [projectId] : (await redis.smembers(k.projects)).sort();
      const out: (KeyInfo & { plan: string })[] = [];
      for (const p of projects) {
        const project = await getProject(p);
        for (const id of (await redis.smembers(k.projectKeys(p))).sort()) {
          const hash = await redis.get(k.keyId(id));
          const info = hash ? await keyInfo(hash) : null;
          if (info) out.push({ ...info, plan: project?.plan ?? "" });
        }
      }
      return out;
    },

    /** The edge's lookup: null for unknown or revoked keys. Two reads; the edge caches them. */
    async lookup(key: string): Promise<KeyLookup | null> {
      const info = await keyInfo(hashKey(key));
      if (!info || info.revoked) return null;
      const project = await getProject(info.projectId);
      if (!project) return null;
      return {
        keyId: info.keyId,
        projectId: info.projectId,
        scope: info.scope,
        plan: project.plan,
        overrides: project.overrides,
      };
    },
  };
}

export type KeyStore = ReturnType<typeof createKeyStore>;
