import { randomBytes } from "node:crypto";
import { type AlertRule, parseRuleInput } from "../../src/alerts/rule.js";
import { RuleCapError, type RuleStore } from "../../src/alerts/rule-store.js";
import type { Plan } from "../../src/config.js";
import type { AuditEntry, AuditLog } from "../../src/control/audit.js";
import { generateKey, type Scope } from "../../src/keys/key-format.js";
import {
  ADMIN_PROJECT,
  KeyCapError,
  type KeyInfo,
  type KeyStore,
  KeyStoreError,
  type ProjectInfo,
} from "../../src/keys/key-store.js";

// In-memory stores behind the control service's own interfaces (KeyStore, RuleStore, AuditLog),
// for unit tests of the service's decisions: who may, what is refused, what the audit says. The
// stores themselves are tested on a real Redis (test/integration/control.*). A method the
// service's tests never reach throws.

const unused = (name: string) => () => {
  throw new Error(`fake store: ${name} is not used by these tests`);
};

export function fakeKeyStore(now: () => number = Date.now): KeyStore & { rotations: number } {
  const keys = new Map<string, KeyInfo>();
  const projects = new Map<string, ProjectInfo>();
  const iso = () => new Date(now()).toISOString();
  const live = (projectId: string) =>
    [...keys.values()].filter((k) => k.projectId === projectId && !k.revoked).length;

  function make(
    projectId: string,
    scope: Scope,
    plan: string | undefined,
    def: string,
    max?: number,
  ) {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(projectId)) throw new KeyStoreError("project id");
    if (max !== undefined && live(projectId) >= max) throw new KeyCapError(projectId, max);
    if (!projects.has(projectId)) {
      projects.set(projectId, { projectId, plan: plan ?? def, overrides: {}, createdAt: iso() });
    }
    const info: KeyInfo = {
      keyId: `key_${randomBytes(8).toString("hex")}`,
      projectId,
      createdAt: iso(),
      revoked: false,
      scope,
      lastUsedAt: null,
      rotatedAt: null,
    };
    keys.set(info.keyId, info);
    return { key: generateKey(scope), ...info, plan: projects.get(projectId)?.plan ?? def };
  }

  const store = {
    rotations: 0,
    async create(projectId, opts) {
      return make(projectId, opts.scope ?? "report", opts.plan, opts.defaultPlan, opts.max);
    },
    async import(projectId, _key, opts) {
      const { key: _k, ...made } = make(projectId, "report", opts.plan, opts.defaultPlan, opts.max);
      return made;
    },
    async createAdmin() {
      const info: KeyInfo = {
        keyId: `key_${randomBytes(8).toString("hex")}`,
        projectId: ADMIN_PROJECT,
        createdAt: iso(),
        revoked: false,
        scope: "admin",
        lastUsedAt: null,
        rotatedAt: null,
      };
      keys.set(info.keyId, info);
      return { key: generateKey("admin"), ...info, plan: "" };
    },
    get: async (keyId) => keys.get(keyId) ?? null,
    async revoke(keyId) {
      const k = keys.get(keyId);
      if (!k) return false;
      k.revoked = true;
      return true;
    },
    async rotate(keyId, expiresInS) {
      const k = keys.get(keyId);
      if (!k || k.revoked) return null;
      store.rotations += 1;
      // One moment for both times, as the real store: two reads of the clock may differ by a ms.
      const at = now();
      k.rotatedAt = new Date(at).toISOString();
      return {
        ...k,
        key: generateKey(k.scope),
        rotatedAt: k.rotatedAt,
        lastUsedAt: null,
        oldExpiresAt: new Date(at + expiresInS * 1000).toISOString(),
      };
    },
    async setPlan(projectId, plan, overrides: Partial<Plan> = {}) {
      const p = { projectId, plan, overrides };
      projects.set(projectId, { ...p, createdAt: projects.get(projectId)?.createdAt });
      return p;
    },
    async getProject(projectId) {
      const p = projects.get(projectId);
      if (!p) return null;
      const { createdAt: _c, ...rest } = p;
      return rest;
    },
    projectDetails: async (projectId) => projects.get(projectId) ?? null,
    async createProject(projectId, plan, overrides = {}) {
      if (projects.has(projectId)) return null;
      const p = { projectId, plan, overrides, createdAt: iso() };
      projects.set(projectId, p);
      return p;
    },
    listProjects: async () => [...projects.values()],
    async list(projectId) {
      return [...keys.values()]
        .filter((k) => projectId === undefined || k.projectId === projectId)
        .map((k) => ({ ...k, plan: projects.get(k.projectId)?.plan ?? "" }));
    },
    lookup: unused("lookup"),
    countLive: async (projectId) => live(projectId),
  } satisfies KeyStore & { rotations: number };
  return store;
}

export function fakeRuleStore(): RuleStore {
  const rules = new Map<string, AlertRule>();
  const secrets = new Map<string, string>();
  return {
    async create(input, opts = {}) {
      const fields = parseRuleInput(input);
      const count = [...rules.values()].filter((r) => r.project === fields.project).length;
      if (opts.max !== undefined && count >= opts.max)
        throw new RuleCapError(fields.project, opts.max);
      const rule: AlertRule = {
        id: `alr_${randomBytes(8).toString("hex")}`,
        ...fields,
        created_at: new Date().toISOString(),
      };
      rules.set(rule.id, rule);
      secrets.set(rule.id, `whsec_${randomBytes(8).toString("hex")}`);
      return { rule, secret: secrets.get(rule.id) as string };
    },
    async update(id, input) {
      const current = rules.get(id);
      if (!current) return null;
      const rule = {
        id,
        ...parseRuleInput({ ...input, project: current.project }),
        created_at: current.created_at,
      };
      rules.set(id, rule);
      return rule;
    },
    get: async (id) => rules.get(id) ?? null,
    list: async (project) =>
      [...rules.values()].filter((r) => project === undefined || r.project === project),
    forProjects: unused("forProjects"),
    secret: async (id) => secrets.get(id) ?? null,
    remove: async (id) => rules.delete(id),
  };
}

export function fakeAuditLog(now: () => number = Date.now): AuditLog & { entries: AuditEntry[] } {
  const entries: AuditEntry[] = [];
  let n = 0;
  return {
    entries,
    keys: { all: "audit", ofProject: (p) => `audit:${p}` },
    async write(input) {
      n += 1;
      const entry = {
        id: `aud_${String(n).padStart(16, "0")}`,
        at: new Date(now()).toISOString(),
        ...input,
      };
      entries.push(entry);
      return entry;
    },
    async read(q) {
      return entries
        .filter((e) => q.project === undefined || e.project === q.project)
        .reverse()
        .slice(0, q.limit + 1)
        .map((entry) => ({ t: Date.parse(entry.at), entry }));
    },
  };
}
