import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import type { Plan } from "../config.js";
import type { RedisClient } from "../redis/connections.js";
import {
  generateId,
  generateKey,
  hashKey,
  isWellFormedKey,
  SCOPES,
  type Scope,
} from "./key-format.js";

// Projects and their keys in Redis. Only SHA-256 hashes of keys are stored.
//   {p}:key:<sha256>          hash  key_id, project_id, created_at, revoked, revoked_at?, scope?,
//                                   expires_at? (a rotated-out secret: refused from then on),
//                                   rotated_at?, last_used_at?
//   {p}:key-id:<key_id>       string <sha256> of the key's current secret
//   {p}:key-hashes:<key_id>   set   <sha256> of every secret the key has had (rotation), so a
//                                   revocation reaches the old ones too
//   {p}:project:<project_id>  hash  plan, monthly?, burst?, capacity?, created_at,
//                                   plan_updated_at (a restore's merge keeps later plan changes)
//   {p}:project-keys:<id>     set   key ids; admin keys are in project-keys:* (ADMIN_PROJECT)
//   {p}:projects              set   project ids
//
// An admin key belongs to no project: its project_id is ADMIN_PROJECT, "*", which no project id
// can be (PROJECT_ID has no "*"), and it is never in `projects`.

export interface KeyInfo {
  keyId: string;
  projectId: string;
  createdAt: string;
  revoked: boolean;
  scope: Scope;
  /** When the key's current secret was last presented (at most once a minute is written). */
  lastUsedAt: string | null;
  /** When the current secret replaced an older one. */
  rotatedAt: string | null;
}

/** The project of admin keys: none. No project id can be "*". */
export const ADMIN_PROJECT = "*";

export interface ProjectInfo {
  projectId: string;
  plan: string;
  /** Per-project overrides of the plan's numbers. */
  overrides: Partial<Plan>;
  createdAt?: string;
}

/** What the edge needs to know about a presented key. */
export interface KeyLookup {
  keyId: string;
  projectId: string;
  scope: Scope;
  plan: string;
  overrides: Partial<Plan>;
  /** A rotated-out secret: refused from this time (ms) on; caches must not hold it past it. */
  expiresAt?: number;
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

/** A project's keys not revoked are at its cap: no key is made. */
export class KeyCapError extends Error {
  override name = "KeyCapError";
  constructor(
    readonly projectId: string,
    readonly max: number,
  ) {
    super(`project ${projectId} has ${max} keys not revoked, its cap`);
  }
}

const PROJECT_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** Where projects and keys live, whatever the queue prefix. */
export const KEY_STORE_PREFIX = "headroom";

/** How long a key's change may hold its lock, and how long another waits for it. */
const KEY_LOCK_TTL_MS = 10_000;
const KEY_LOCK_WAIT_MS = 5_000;
const RELEASE_LOCK = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`;

/** How often a key's last use is written: a look-up after this long writes it again. */
const LAST_USED_EVERY_MS = 60_000;

/** A key as stored, with its project's plan (an admin key's is ""). */
export type StoredKey = KeyInfo & { plan: string };

/** A key just made: its plaintext is returned this once. */
export type NewKey = StoredKey & { key: string };

/** A key given a new secret: the new plaintext (this once), and when the old one stops working. */
export type RotatedKey = KeyInfo & {
  key: string;
  rotatedAt: string;
  lastUsedAt: null;
  oldExpiresAt: string;
};

/** The keys and projects in Redis (createKeyStore); what the CLI, the control API and the edge use. */
export interface KeyStore {
  /**
   * Creates a key for a project (creating the project if needed); the plaintext is returned once.
   * With `max`, refused (KeyCapError) when the project has that many keys not revoked: counted
   * and made under the project's lock, so keys made at once never pass the cap together.
   */
  create(
    projectId: string,
    opts: { plan?: string; defaultPlan: string; scope?: Scope; max?: number },
  ): Promise<NewKey>;
  /** Registers an existing key (any well-formed format) for a project; `max` as for `create`. */
  import(
    projectId: string,
    key: string,
    opts: { plan?: string; defaultPlan: string; max?: number },
  ): Promise<StoredKey>;
  /** The project's keys not revoked. */
  countLive(projectId: string): Promise<number>;
  /** An operator's key, of no project; the plaintext is returned once. */
  createAdmin(): Promise<NewKey>;
  /** The key with this id (its current secret), or null. */
  get(keyId: string): Promise<KeyInfo | null>;
  /** Revokes every secret the key has had: the current one, and any rotated out. */
  revoke(keyId: string): Promise<boolean>;
  /**
   * A new secret for the same key id, scope and project; the old one keeps working until
   * `expiresInS` from now (0: refused at once). Null for no such key, or a revoked one.
   */
  rotate(keyId: string, expiresInS: number): Promise<RotatedKey | null>;
  /** Puts a project on `plan` (another plan drops the overrides not given); the project as stored. */
  setPlan(projectId: string, plan: string, overrides?: Partial<Plan>): Promise<ProjectInfo>;
  getProject(projectId: string): Promise<ProjectInfo | null>;
  projectDetails(projectId: string): Promise<ProjectInfo | null>;
  /** A new project on `plan`, with overrides; null when the project exists already. */
  createProject(
    projectId: string,
    plan: string,
    overrides?: Partial<Plan>,
  ): Promise<ProjectInfo | null>;
  /** Every project, by id. */
  listProjects(): Promise<ProjectInfo[]>;
  /** The keys of a project, or of every project and then the admin keys. */
  list(projectId?: string): Promise<StoredKey[]>;
  /** The edge's lookup: null for unknown or revoked keys. Two reads; the edge caches them. */
  lookup(key: string): Promise<KeyLookup | null>;
}

export function createKeyStore(
  redis: RedisClient,
  prefix = KEY_STORE_PREFIX,
  opts: { now?: () => number } = {},
): KeyStore {
  const now = opts.now ?? Date.now;
  const k = {
    key: (hash: string) => `${prefix}:key:${hash}`,
    keyId: (id: string) => `${prefix}:key-id:${id}`,
    keyHashes: (id: string) => `${prefix}:key-hashes:${id}`,
    keyLock: (id: string) => `${prefix}:key-lock:${id}`,
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
    const details = await projectDetails(projectId);
    if (!details) return null;
    const { createdAt: _createdAt, ...project } = details;
    return project;
  }

  /** The project with when it was made (the control plane shows it). */
  async function projectDetails(projectId: string): Promise<ProjectInfo | null> {
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
    return {
      projectId,
      plan: h.plan,
      overrides,
      ...(h.created_at ? { createdAt: h.created_at } : {}),
    };
  }

  function checkOverrides(overrides: Partial<Plan>): Partial<Plan> {
    const checked = overridesSchema.safeParse(overrides);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      throw new KeyStoreError(`${issue?.path.join(".")}: ${issue?.message}`);
    }
    return checked.data;
  }

  /**
   * Runs `change` with the key id's lock held: rotations and revocations of one key happen one
   * after another (two at once would leave a secret that no later rotation or revocation ends).
   * The key store's keys live in different Cluster slots, so this is a lock rather than a script.
   */
  async function underKeyLock<T>(keyId: string, change: () => Promise<T>): Promise<T> {
    const lock = k.keyLock(keyId);
    const token = randomUUID();
    const deadline = Date.now() + KEY_LOCK_WAIT_MS;
    while ((await redis.set(lock, token, "PX", KEY_LOCK_TTL_MS, "NX")) !== "OK") {
      if (Date.now() >= deadline)
        throw new KeyStoreError(`another change to key ${keyId} is under way: try again`);
      await sleep(20);
    }
    try {
      return await change();
    } finally {
      // Only our own lock: one that expired and was taken by another change stays its.
      await redis.eval(RELEASE_LOCK, 1, lock, token);
    }
  }

  /** The project's keys not revoked: one pipeline per step, whatever their number. */
  async function countLive(projectId: string): Promise<number> {
    const ids = await redis.smembers(k.projectKeys(projectId));
    if (ids.length === 0) return 0;
    const hashes = await Promise.all(ids.map((id) => redis.get(k.keyId(id))));
    const fields = await Promise.all(
      hashes.map((h) => (h === null ? [null, null] : redis.hmget(k.key(h), "key_id", "revoked"))),
    );
    return fields.filter(([id, revoked]) => id !== null && revoked !== "1").length;
  }

  /** Runs `make` under the project's lock when a cap is given, refused at the cap. */
  function withinCap<T>(projectId: string, max: number | undefined, make: () => Promise<T>) {
    if (max === undefined) return make();
    // A lock of its own name: no key id starts with "project:".
    return underKeyLock(`project:${projectId}`, async () => {
      if ((await countLive(projectId)) >= max) throw new KeyCapError(projectId, max);
      return make();
    });
  }

  async function ensureProject(projectId: string, plan: string | undefined, defaultPlan: string) {
    checkProjectId(projectId);
    const created = await redis.hsetnx(k.project(projectId), "plan", plan ?? defaultPlan);
    const at = new Date(now()).toISOString();
    if (created) {
      await redis.hset(k.project(projectId), { created_at: at, plan_updated_at: at });
    } else if (plan && (await redis.hget(k.project(projectId), "plan")) !== plan) {
      // A new plan, as with setPlan: the old plan's overrides go.
      await redis
        .multi()
        .hset(k.project(projectId), { plan, plan_updated_at: at })
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
      createdAt: new Date(now()).toISOString(),
      revoked: false,
      scope,
      lastUsedAt: null,
      rotatedAt: null,
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
      redis.sadd(k.keyHashes(info.keyId), hash),
      redis.sadd(k.projectKeys(projectId), info.keyId),
    ]);
    return info;
  }

  /** The scope as stored: none is a key from before scopes (a report key); an unknown one, no key. */
  function scopeOf(text: string | undefined): Scope | null {
    if (text === undefined || text === "") return "report";
    return (SCOPES as readonly string[]).includes(text) ? (text as Scope) : null;
  }

  async function keyFields(hash: string) {
    const h = await redis.hgetall(k.key(hash));
    if (!h.key_id || !h.project_id) return null;
    const scope = scopeOf(h.scope);
    if (scope === null) return null;
    // An admin key is the only key of no project, and of no project only.
    if ((scope === "admin") !== (h.project_id === ADMIN_PROJECT)) return null;
    const info: KeyInfo = {
      keyId: h.key_id,
      projectId: h.project_id,
      createdAt: h.created_at ?? "",
      revoked: h.revoked === "1",
      scope,
      lastUsedAt: h.last_used_at ?? null,
      rotatedAt: h.rotated_at ?? null,
    };
    const expiresAt = h.expires_at === undefined ? undefined : Date.parse(h.expires_at);
    return { info, expiresAt };
  }

  async function keyInfo(hash: string): Promise<KeyInfo | null> {
    return (await keyFields(hash))?.info ?? null;
  }

  return {
    /** Creates a key for a project (creating the project if needed); the plaintext is returned once. */
    async create(
      projectId: string,
      opts: { plan?: string; defaultPlan: string; scope?: Scope; max?: number },
    ) {
      const scope = opts.scope ?? "report";
      if (scope === "admin") throw new KeyStoreError("an admin key is made with createAdmin");
      checkProjectId(projectId);
      return withinCap(projectId, opts.max, async () => {
        await ensureProject(projectId, opts.plan, opts.defaultPlan);
        const key = generateKey(scope);
        const info = await store(key, projectId, scope);
        const project = await getProject(projectId);
        return { key, ...info, plan: project?.plan ?? opts.defaultPlan };
      });
    },

    /** Registers an existing key (any well-formed format) for a project; `max` as for `create`. */
    async import(
      projectId: string,
      key: string,
      opts: { plan?: string; defaultPlan: string; max?: number },
    ) {
      if (!isWellFormedKey(key)) throw new KeyStoreError("the key is not well formed");
      checkProjectId(projectId);
      return withinCap(projectId, opts.max, async () => {
        await ensureProject(projectId, opts.plan, opts.defaultPlan);
        const info = await store(key, projectId, "report");
        const project = await getProject(projectId);
        return { ...info, plan: project?.plan ?? opts.defaultPlan };
      });
    },

    countLive,

    /** An operator's key, of no project; the plaintext is returned once. */
    async createAdmin() {
      const key = generateKey("admin");
      const info = await store(key, ADMIN_PROJECT, "admin");
      return { key, ...info, plan: "" };
    },

    /** The key with this id (its current secret), or null. */
    async get(keyId: string): Promise<KeyInfo | null> {
      const hash = await redis.get(k.keyId(keyId));
      return hash ? keyInfo(hash) : null;
    },

    /** Revokes every secret the key has had: the current one, and any rotated out. */
    revoke(keyId: string): Promise<boolean> {
      return underKeyLock(keyId, async () => {
        const hash = await redis.get(k.keyId(keyId));
        if (!hash) return false;
        const hashes = new Set([hash, ...(await redis.smembers(k.keyHashes(keyId)))]);
        const at = new Date(now()).toISOString();
        await Promise.all(
          [...hashes].map((h) => redis.hset(k.key(h), { revoked: "1", revoked_at: at })),
        );
        return true;
      });
    },

    /**
     * A new secret for the same key id, scope and project. Every earlier secret keeps working
     * until `expiresInS` from now at the latest (0: refused at once, as revoked): a rotation that
     * shuts out a leaked secret shuts out the ones before it too. Null for no such key, or a
     * revoked one. The new plaintext is returned once.
     */
    rotate(keyId: string, expiresInS: number) {
      return underKeyLock(keyId, async () => {
        const oldHash = await redis.get(k.keyId(keyId));
        const old = oldHash ? await keyInfo(oldHash) : null;
        if (!oldHash || !old || old.revoked) return null;
        const key = generateKey(old.scope);
        const hash = hashKey(key);
        const at = now();
        const rotatedAt = new Date(at).toISOString();
        const endsAt = new Date(at + expiresInS * 1000).toISOString();
        if (!(await redis.hsetnx(k.key(hash), "key_id", keyId))) {
          throw new KeyStoreError("this key is already registered");
        }
        const earlier = new Set([oldHash, ...(await redis.smembers(k.keyHashes(keyId)))]);
        await Promise.all([
          redis.hset(k.key(hash), {
            project_id: old.projectId,
            created_at: old.createdAt,
            revoked: "0",
            scope: old.scope,
            rotated_at: rotatedAt,
          }),
          redis.sadd(k.keyHashes(keyId), hash, oldHash),
        ]);
        // The earlier secrets' end is written before the new one becomes the key's current one.
        await Promise.all(
          [...earlier].map(async (h) => {
            if (expiresInS === 0)
              return redis.hset(k.key(h), {
                revoked: "1",
                revoked_at: rotatedAt,
                expires_at: rotatedAt,
              });
            const ends = await redis.hget(k.key(h), "expires_at");
            // ISO times of one form compare as text; an earlier end stays.
            if (ends === null || ends > endsAt) await redis.hset(k.key(h), { expires_at: endsAt });
          }),
        );
        await redis.set(k.keyId(keyId), hash);
        return {
          key,
          ...old,
          rotatedAt,
          lastUsedAt: null,
          oldExpiresAt: endsAt,
        };
      });
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
      const checked = { data: checkOverrides(overrides) };
      const current = await getProject(projectId);
      if (!current) throw new KeyStoreError(`unknown project ${projectId}`);
      const fields: Record<string, string> = {
        plan,
        plan_updated_at: new Date(now()).toISOString(),
      };
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
    projectDetails,

    /** A new project on `plan`, with overrides; null when the project exists already. */
    async createProject(
      projectId: string,
      plan: string,
      overrides: Partial<Plan> = {},
    ): Promise<ProjectInfo | null> {
      checkProjectId(projectId);
      const given = checkOverrides(overrides);
      if (!(await redis.hsetnx(k.project(projectId), "plan", plan))) return null;
      const at = new Date(now()).toISOString();
      const fields: Record<string, string> = { created_at: at, plan_updated_at: at };
      for (const name of OVERRIDES) {
        const value = given[name];
        if (value !== undefined) fields[name] = String(value ?? "none");
      }
      await redis.hset(k.project(projectId), fields);
      await redis.sadd(k.projects, projectId);
      return projectDetails(projectId);
    },

    /** Every project, by id. */
    async listProjects(): Promise<ProjectInfo[]> {
      const out: ProjectInfo[] = [];
      for (const id of (await redis.smembers(k.projects)).sort()) {
        const project = await projectDetails(id);
        if (project) out.push(project);
      }
      return out;
    },

    /** The keys of a project, or of every project and then the admin keys. */
    async list(projectId?: string) {
      const projects = projectId
        ? [projectId]
        : [...(await redis.smembers(k.projects)).sort(), ADMIN_PROJECT];
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
      const hash = hashKey(key);
      const fields = await keyFields(hash);
      if (!fields || fields.info.revoked) return null;
      const { info, expiresAt } = fields;
      const at = now();
      // A rotated-out secret past its overlap is refused as a revoked one (and so is a bad date).
      if (expiresAt !== undefined && !(expiresAt > at)) return null;
      const last = info.lastUsedAt === null ? 0 : Date.parse(info.lastUsedAt);
      if (!(at - last < LAST_USED_EVERY_MS)) {
        // Not awaited, and never in the way: the last use is a hint for `keys list`.
        redis.hset(k.key(hash), "last_used_at", new Date(at).toISOString()).catch(() => undefined);
      }
      const end = expiresAt === undefined ? {} : { expiresAt };
      if (info.scope === "admin") {
        return {
          keyId: info.keyId,
          projectId: ADMIN_PROJECT,
          scope: "admin",
          plan: "",
          overrides: {},
          ...end,
        };
      }
      const project = await getProject(info.projectId);
      if (!project) return null;
      return {
        keyId: info.keyId,
        projectId: info.projectId,
        scope: info.scope,
        plan: project.plan,
        overrides: project.overrides,
        ...end,
      };
    },
  };
}
