import { hostname, userInfo } from "node:os";
import type { z } from "zod";
import { TEST_EVENT_TYPE, testEvent, webhookPayload } from "../alerts/alert-event.js";
import { createDestinationPolicy, DestinationRefusedError } from "../alerts/destination-policy.js";
import { createGuardedFetch } from "../alerts/guarded-fetch.js";
import { type AlertRule, RuleError, type RuleInput } from "../alerts/rule.js";
import { createRuleStore, RuleCapError, type RuleStore } from "../alerts/rule-store.js";
import { createWebhookResolver, webhookDnsOf } from "../alerts/webhook-dns.js";
import { sendWebhook } from "../alerts/webhook-sender.js";
import { type Config, capsOf, type Plan, type PlanCaps } from "../config.js";
import { HttpError } from "../http/errors.js";
import { KEY_PREFIX, type Scope } from "../keys/key-format.js";
import {
  ADMIN_PROJECT,
  createKeyStore,
  KeyCapError,
  type KeyInfo,
  type KeyLookup,
  type KeyStore,
  KeyStoreError,
  type ProjectInfo,
  type StoredKey,
} from "../keys/key-store.js";
import type { RedisClient } from "../redis/connections.js";
import {
  type AuditInput,
  type AuditLog,
  type AuditView,
  createAuditLog,
  tenantView,
} from "./audit.js";
import { type DeclarationsActions, declarationsActions } from "./declarations-actions.js";
import { createDeclarationsStore, type DeclarationsStore } from "./declarations-store.js";
import {
  type createdKey,
  type createdRule,
  type KeyView,
  type ProjectView,
  type rotatedKey,
  rotateKeyBody,
  type ruleBody,
  type testSent,
} from "./schemas.js";

// Every management action, once: the CLI (`headroom keys|alerts …`) and the control plane's HTTP
// routes call these same functions. Each checks who may do it, does it, and writes the audit
// log. Refusals are HttpErrors with the contract's codes (the CLI prints their message).
//
// Who may: the CLI and admin keys anything; a manage key its own project's keys and alert rules
// (not its plan, not other projects). Something of another project is answered as not found,
// so a manage key learns nothing of projects it does not manage.

export type Principal =
  | { kind: "cli"; user: string; source: string }
  | { kind: "key"; key: KeyLookup; source: string };

/** The CLI, as the audit log names it: the OS user, on this host. */
export function cliPrincipal(): Principal {
  let user = "unknown";
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the user stays unknown.
  }
  return { kind: "cli", user, source: hostname() };
}

export type ControlConfig = Pick<
  Config,
  | "PLANS"
  | "DEFAULT_PLAN"
  | "QUEUE_PREFIX"
  | "ALERTS_WEBHOOK_ALLOW"
  | "ALERTS_WEBHOOK_TIMEOUT_MS"
  | "ALERTS_WEBHOOK_DNS_SERVERS"
  | "ALERTS_WEBHOOK_DNS_TIMEOUT_MS"
  | "ALERTS_WEBHOOK_DNS_MAX_CONCURRENT"
  | "AUDIT_RETENTION_DAYS"
  | "AUDIT_MAX_ENTRIES_PER_PROJECT"
>;

type Overrides = Partial<Plan>;

const forbidden = (message: string) =>
  new HttpError("insufficient_scope", message, {
    headers: { "www-authenticate": 'Bearer error="insufficient_scope"' },
  });
const notFound = (what: string) => new HttpError("not_found", `no ${what}`);
const invalid = (message: string) => new HttpError("invalid_body", message);

export function keyView(k: KeyInfo): KeyView {
  return {
    key_id: k.keyId,
    project: k.projectId === ADMIN_PROJECT ? null : k.projectId,
    scope: k.scope,
    prefix: KEY_PREFIX[k.scope],
    created_at: k.createdAt,
    last_used_at: k.lastUsedAt,
    rotated_at: k.rotatedAt,
    revoked: k.revoked,
  };
}

export function projectView(p: ProjectInfo): ProjectView {
  return {
    project: p.projectId,
    plan: p.plan,
    overrides: p.overrides,
    created_at: p.createdAt ?? null,
  };
}

/** A webhook as the audit log keeps it: its origin only (a path may hold a receiver's token). */
const webhookOrigin = (url: string) => (URL.canParse(url) ? `${new URL(url).origin}/…` : "");
const auditedRule = (r: AlertRule) => ({ ...r, webhook: webhookOrigin(r.webhook) });

/** Every management action, for the CLI and the control plane's routes (createControl). */
export interface Control extends DeclarationsActions<Principal> {
  keys: KeyStore;
  rules: RuleStore;
  audit: AuditLog;
  createProject(
    p: Principal,
    body: { project: string; plan?: string; overrides?: Overrides },
  ): Promise<ProjectView>;
  listProjects(p: Principal): Promise<ProjectView[]>;
  getProject(p: Principal, project: string): Promise<ProjectView>;
  /** The CLI's `keys set-plan`: another plan resets the overrides not given with it. */
  setPlan(
    p: Principal,
    project: string,
    body: { plan: string; overrides?: Overrides },
  ): Promise<ProjectView>;
  /** A key for a project; the secret is in this answer only (admin keys: the CLI only). */
  createKey(
    p: Principal,
    project: string | null,
    opts: { scope: Scope; plan?: string },
  ): Promise<z.infer<typeof createdKey>>;
  /** The CLI's `keys import`: a key from elsewhere (a report key), kept as it is. */
  importKey(p: Principal, project: string, key: string, plan?: string): Promise<StoredKey>;
  /** Keys of a project (ids, scopes, prefixes, times); the CLI may list every project's. */
  listKeys(p: Principal, project?: string): Promise<(KeyView & { plan: string })[]>;
  /** A new secret for the same key; the old one works `expiresInS` more (0: not at all). */
  rotateKey(p: Principal, keyId: string, expiresInS: number): Promise<z.infer<typeof rotatedKey>>;
  /** Revoked everywhere within KEY_CACHE_TTL_MS, every secret it has had included. */
  revokeKey(p: Principal, keyId: string): Promise<{ key_id: string; revoked: true }>;
  createRule(
    p: Principal,
    project: string,
    body: z.input<typeof ruleBody>,
  ): Promise<z.infer<typeof createdRule>>;
  listRules(p: Principal, project?: string): Promise<AlertRule[]>;
  getRule(p: Principal, id: string): Promise<AlertRule>;
  updateRule(p: Principal, id: string, body: z.input<typeof ruleBody>): Promise<AlertRule>;
  removeRule(p: Principal, id: string): Promise<{ id: string; removed: true }>;
  /** Sends a signed test event to the rule's webhook, as the alerts worker would. */
  testRule(p: Principal, id: string): Promise<z.infer<typeof testSent>>;
  /**
   * The audit log, newest first: an admin's of every project (or one), whole; a manage key's of
   * its own project, the operator's actions as "operator" (tenantView).
   */
  readAudit(
    p: Principal,
    q: Parameters<AuditLog["read"]>[0],
  ): Promise<{ t: number; entry: AuditView }[]>;
}

export function createControl(
  /** null only with `opts.stores`. */
  redis: RedisClient | null,
  config: ControlConfig,
  opts: {
    now?: () => number;
    /** The stores, when not those of `redis` (unit tests give their own). */
    stores?: {
      keys: KeyStore;
      rules: RuleStore;
      audit: AuditLog;
      declarations?: DeclarationsStore;
    };
  } = {},
): Control {
  const stores = opts.stores;
  if (!stores && redis === null) throw new Error("createControl: a Redis, or stores");
  const keys = stores?.keys ?? createKeyStore(redis as RedisClient, undefined, { now: opts.now });
  const rules = stores?.rules ?? createRuleStore(redis as RedisClient, config.QUEUE_PREFIX);
  const declarations =
    stores?.declarations ??
    (redis === null ? null : createDeclarationsStore(redis, config.QUEUE_PREFIX));
  // One policy, so the cap on webhook look-ups in flight (webhook-dns.ts) is this plane's.
  const destinations = createDestinationPolicy({
    allow: config.ALERTS_WEBHOOK_ALLOW,
    resolve: createWebhookResolver(webhookDnsOf(config)),
  });
  const audit =
    stores?.audit ??
    createAuditLog(redis as RedisClient, {
      retentionDays: config.AUDIT_RETENTION_DAYS,
      maxPerProject: config.AUDIT_MAX_ENTRIES_PER_PROJECT,
      now: opts.now,
    });

  const isAdmin = (p: Principal) => p.kind === "cli" || p.key.scope === "admin";

  /** Only management keys reach here; a data key is refused as the routes refuse it. */
  function checkManagement(p: Principal) {
    if (p.kind === "key" && p.key.scope !== "admin" && p.key.scope !== "manage") {
      throw forbidden("this endpoint needs an admin or manage key");
    }
  }

  function requireAdmin(p: Principal, what: string) {
    checkManagement(p);
    if (!isAdmin(p)) throw forbidden(`${what} needs an admin key`);
  }

  /** The project named in a request: an admin's any, a manage key's own only. */
  function requireProject(p: Principal, project: string) {
    checkManagement(p);
    if (isAdmin(p)) return;
    if (p.kind === "key" && p.key.projectId !== project) {
      throw forbidden(`this key manages project ${p.key.projectId} only`);
    }
  }

  /** May `p` see something of `project`? Not: it is not found, as if it did not exist. */
  const sees = (p: Principal, project: string) =>
    isAdmin(p) || (p.kind === "key" && p.key.projectId === project);

  function write(p: Principal, entry: Omit<AuditInput, "actor" | "source">) {
    return audit.write({
      actor:
        p.kind === "cli"
          ? { key_id: null, kind: "cli", user: p.user }
          : { key_id: p.key.keyId, kind: p.key.scope === "admin" ? "admin" : "manage" },
      source: p.source,
      ...entry,
    });
  }

  function checkPlan(plan: string) {
    // An own key: `constructor` is in every object, and no plan.
    if (!Object.hasOwn(config.PLANS, plan)) {
      throw invalid(`unknown plan ${plan}; plans: ${Object.keys(config.PLANS).join(", ")}`);
    }
  }

  /** What a project on `plan` may hold; an unknown plan's are the defaults. */
  const capsFor = (plan: string): PlanCaps =>
    capsOf(Object.hasOwn(config.PLANS, plan) ? config.PLANS[plan] : undefined);

  /** A cap reached, as a 409 that names it (`limit`: the cap). */
  const atCap = (what: string, project: string, max: number) =>
    new HttpError(
      "conflict",
      `project ${project} has ${max} ${what}, its plan's cap: remove one first, or ask for a plan with more`,
      { body: { limit: max, remaining: 0 } },
    );

  /** The stores' refusals: a bad project id or override as the contract's 400, a cap as 409. */
  async function store<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (err instanceof KeyStoreError || err instanceof RuleError) throw invalid(err.message);
      if (err instanceof KeyCapError) throw atCap("keys not revoked", err.projectId, err.max);
      if (err instanceof RuleCapError) throw atCap("alert rules", err.project, err.max);
      throw err;
    }
  }

  async function existingProject(project: string): Promise<ProjectInfo> {
    const found = await keys.projectDetails(project);
    if (!found) throw notFound(`project ${project}`);
    return found;
  }

  /** A key `p` may act on: one of a project it manages (an admin key: only through the CLI). */
  async function visibleKey(p: Principal, keyId: string): Promise<KeyInfo> {
    checkManagement(p);
    const info = await keys.get(keyId);
    if (!info || !sees(p, info.projectId)) throw notFound(`key ${keyId}`);
    if (info.scope === "admin" && p.kind !== "cli") {
      throw forbidden("admin keys are rotated and revoked with the CLI only");
    }
    return info;
  }

  async function visibleRule(p: Principal, id: string): Promise<AlertRule> {
    checkManagement(p);
    const rule = await rules.get(id);
    if (!rule || !sees(p, rule.project)) throw notFound(`alert rule ${id}`);
    return rule;
  }

  /** A rule's webhook must point where the destination policy allows (see SECURITY.md). */
  async function checkDestination(project: string, webhook: string): Promise<void> {
    // A malformed URL is the rule schema's to report.
    if (!URL.canParse(webhook)) return;
    try {
      await destinations.checkUrl(webhook);
    } catch (err) {
      const why =
        err instanceof DestinationRefusedError
          ? err.message
          : `its host cannot be resolved (${(err as Error).message})`;
      throw invalid(
        `invalid rule: webhook ${new URL(webhook).origin} for project ${project}: ${why}`,
      );
    }
  }

  /** What a project change did, for the audit log; null when nothing changed. */
  async function auditProjectChange(
    p: Principal,
    before: ProjectInfo | null,
    after: ProjectInfo | null,
  ) {
    if (!after) return;
    const was = before && { plan: before.plan, overrides: before.overrides };
    const now = { plan: after.plan, overrides: after.overrides };
    if (JSON.stringify(was) === JSON.stringify(now)) return;
    await write(p, {
      action: before ? "project.set_plan" : "project.create",
      project: after.projectId,
      target: after.projectId,
      before: was,
      after: now,
    });
  }

  const declared = declarationsActions<Principal>({
    get store() {
      if (!declarations) throw new Error("createControl: no declarations store");
      return declarations;
    },
    async mayManage(p, project) {
      requireProject(p, project);
      await existingProject(project);
    },
    audit: write,
  });

  return {
    keys,
    rules,
    audit,
    ...declared,

    async createProject(
      p: Principal,
      body: { project: string; plan?: string; overrides?: Overrides },
    ): Promise<ProjectView> {
      requireAdmin(p, "creating a project");
      const plan = body.plan ?? config.DEFAULT_PLAN;
      checkPlan(plan);
      const created = await store(() =>
        keys.createProject(body.project, plan, body.overrides ?? {}),
      );
      if (!created) throw new HttpError("conflict", `project ${body.project} exists`);
      await auditProjectChange(p, null, created);
      return projectView(created);
    },

    async listProjects(p: Principal): Promise<ProjectView[]> {
      checkManagement(p);
      if (p.kind === "key" && p.key.scope === "manage") {
        const own = await keys.projectDetails(p.key.projectId);
        return own ? [projectView(own)] : [];
      }
      return (await keys.listProjects()).map(projectView);
    },

    async getProject(p: Principal, project: string): Promise<ProjectView> {
      requireProject(p, project);
      return projectView(await existingProject(project));
    },

    /** The CLI's `keys set-plan`: another plan resets the overrides not given with it. */
    async setPlan(
      p: Principal,
      project: string,
      body: { plan: string; overrides?: Overrides },
    ): Promise<ProjectView> {
      requireAdmin(p, "setting a plan");
      checkPlan(body.plan);
      const before = await existingProject(project);
      const after = await store(() => keys.setPlan(project, body.plan, body.overrides ?? {}));
      await auditProjectChange(p, before, after);
      return projectView({ ...after, createdAt: before.createdAt });
    },

    /**
     * A key for a project; the secret is in this answer only. Over HTTP the project must exist;
     * the CLI creates it (on `plan`, or DEFAULT_PLAN) as `keys create` always has. Admin keys
     * (of no project) are made by the CLI only.
     */
    async createKey(
      p: Principal,
      project: string | null,
      opts: { scope: Scope; plan?: string },
    ): Promise<z.infer<typeof createdKey>> {
      if (opts.scope === "admin") {
        if (p.kind !== "cli") throw forbidden("admin keys are made with the CLI only");
        const k = await keys.createAdmin();
        await write(p, {
          action: "key.create",
          project: null,
          target: k.keyId,
          before: null,
          after: { scope: k.scope, prefix: KEY_PREFIX.admin },
        });
        return { ...keyView(k), key: k.key, plan: "" };
      }
      if (project === null) throw invalid("a project is needed for a key of this scope");
      requireProject(p, project);
      let before: ProjectInfo | null = null;
      if (p.kind === "cli") {
        if (opts.plan !== undefined) checkPlan(opts.plan);
        before = await keys.getProject(project);
      } else {
        if (opts.plan !== undefined) throw invalid("a key's plan is its project's");
        before = await existingProject(project);
      }
      const plan = opts.plan ?? before?.plan ?? config.DEFAULT_PLAN;
      const k = await store(() =>
        keys.create(project, {
          plan: opts.plan,
          defaultPlan: config.DEFAULT_PLAN,
          scope: opts.scope,
          max: capsFor(plan).keys,
        }),
      );
      await auditProjectChange(p, before, await keys.getProject(project));
      await write(p, {
        action: "key.create",
        project,
        target: k.keyId,
        before: null,
        after: { scope: k.scope, prefix: KEY_PREFIX[k.scope] },
      });
      return { ...keyView(k), key: k.key, plan: k.plan };
    },

    /** The CLI's `keys import`: a key from elsewhere (a report key), kept as it is. */
    async importKey(p: Principal, project: string, key: string, plan?: string) {
      requireAdmin(p, "importing a key");
      if (plan !== undefined) checkPlan(plan);
      const before = await keys.getProject(project);
      const max = capsFor(plan ?? before?.plan ?? config.DEFAULT_PLAN).keys;
      const k = await store(() =>
        keys.import(project, key, { plan, defaultPlan: config.DEFAULT_PLAN, max }),
      );
      await auditProjectChange(p, before, await keys.getProject(project));
      await write(p, {
        action: "key.import",
        project,
        target: k.keyId,
        before: null,
        after: { scope: k.scope },
      });
      return k;
    },

    /** Keys of a project (ids, scopes, prefixes, times); the CLI may list every project's. */
    async listKeys(p: Principal, project?: string): Promise<(KeyView & { plan: string })[]> {
      if (project === undefined) requireAdmin(p, "listing every project's keys");
      else {
        requireProject(p, project);
        if (p.kind === "key") await existingProject(project);
      }
      return (await keys.list(project)).map((k) => ({ ...keyView(k), plan: k.plan }));
    },

    /** A new secret for the same key; the old one works `expiresInS` more (0: not at all). */
    async rotateKey(
      p: Principal,
      keyId: string,
      expiresInS: number,
    ): Promise<z.infer<typeof rotatedKey>> {
      // The HTTP body's own bound, for the CLI too: one schema, whoever asks.
      const overlap = rotateKeyBody.shape.expires_in_s.safeParse(expiresInS);
      if (!overlap.success) {
        throw invalid(`expires_in_s: ${overlap.error.issues[0]?.message ?? "out of range"}`);
      }
      const info = await visibleKey(p, keyId);
      if (info.revoked) throw new HttpError("conflict", `key ${keyId} is revoked`);
      const r = await keys.rotate(keyId, overlap.data);
      if (!r) throw new HttpError("conflict", `key ${keyId} is revoked`);
      await write(p, {
        action: "key.rotate",
        project: info.projectId === ADMIN_PROJECT ? null : info.projectId,
        target: keyId,
        before: { rotated_at: info.rotatedAt },
        after: { rotated_at: r.rotatedAt, old_key_expires_at: r.oldExpiresAt },
      });
      return { ...keyView(r), key: r.key, old_key_expires_at: r.oldExpiresAt };
    },

    /** Revoked everywhere within KEY_CACHE_TTL_MS, every secret it has had included. */
    async revokeKey(p: Principal, keyId: string): Promise<{ key_id: string; revoked: true }> {
      const info = await visibleKey(p, keyId);
      await keys.revoke(keyId);
      if (!info.revoked) {
        await write(p, {
          action: "key.revoke",
          project: info.projectId === ADMIN_PROJECT ? null : info.projectId,
          target: keyId,
          before: { revoked: false },
          after: { revoked: true },
        });
      }
      return { key_id: keyId, revoked: true };
    },

    async createRule(
      p: Principal,
      project: string,
      body: z.input<typeof ruleBody>,
    ): Promise<z.infer<typeof createdRule>> {
      requireProject(p, project);
      const owner =
        p.kind === "key" ? await existingProject(project) : await keys.getProject(project);
      const input: RuleInput = { ...body, project };
      await store(async () => checkDestination(project, body.webhook));
      const max = capsFor(owner?.plan ?? config.DEFAULT_PLAN).alert_rules;
      const { rule, secret } = await store(() => rules.create(input, { max }));
      await write(p, {
        action: "alert_rule.create",
        project: rule.project,
        target: rule.id,
        before: null,
        after: auditedRule(rule),
      });
      return { ...rule, secret };
    },

    async listRules(p: Principal, project?: string): Promise<AlertRule[]> {
      if (project === undefined) requireAdmin(p, "listing every project's alert rules");
      else {
        requireProject(p, project);
        if (p.kind === "key") await existingProject(project);
      }
      return rules.list(project);
    },

    getRule: (p: Principal, id: string) => visibleRule(p, id),

    async updateRule(p: Principal, id: string, body: z.input<typeof ruleBody>) {
      const before = await visibleRule(p, id);
      await checkDestination(before.project, body.webhook);
      const after = await store(() => rules.update(id, { ...body, project: before.project }));
      if (!after) throw notFound(`alert rule ${id}`);
      await write(p, {
        action: "alert_rule.update",
        project: after.project,
        target: id,
        before: auditedRule(before),
        after: auditedRule(after),
      });
      return after;
    },

    async removeRule(p: Principal, id: string): Promise<{ id: string; removed: true }> {
      const before = await visibleRule(p, id);
      if (!(await rules.remove(id))) throw notFound(`alert rule ${id}`);
      await write(p, {
        action: "alert_rule.delete",
        project: before.project,
        target: id,
        before: auditedRule(before),
        after: null,
      });
      return { id, removed: true };
    },

    /** Sends a signed test event to the rule's webhook, as the alerts worker would. */
    async testRule(p: Principal, id: string): Promise<z.infer<typeof testSent>> {
      const rule = await visibleRule(p, id);
      const secret = await rules.secret(id);
      if (!secret) throw notFound(`alert rule ${id}`);
      const event = testEvent(rule);
      const guarded = createGuardedFetch(destinations);
      const res = await sendWebhook({
        url: rule.webhook,
        id: event.id,
        body: webhookPayload(event, TEST_EVENT_TYPE),
        secret,
        timeoutMs: config.ALERTS_WEBHOOK_TIMEOUT_MS,
        fetch: guarded.fetch,
      }).finally(() => guarded.close());
      return {
        id: event.id,
        webhook: rule.webhook,
        status: res.status ?? null,
        ok: res.ok,
        ...(res.ok || res.error === undefined ? {} : { error: String(res.error) }),
      };
    },

    /** The audit log, newest first: an admin's of every project (or one), a manage key's own. */
    async readAudit(
      p: Principal,
      q: { project?: string; limit: number; after?: { t: number; id: string } },
    ): Promise<{ t: number; entry: AuditView }[]> {
      checkManagement(p);
      if (isAdmin(p) || p.kind !== "key") return audit.read(q);
      if (q.project !== undefined && q.project !== p.key.projectId) {
        throw forbidden(`this key manages project ${p.key.projectId} only`);
      }
      // A tenant's view: the operator's actions say "operator", nothing of who or where.
      const rows = await audit.read({ ...q, project: p.key.projectId });
      return rows.map((r) => ({ t: r.t, entry: tenantView(r.entry) }));
    },
  };
}
